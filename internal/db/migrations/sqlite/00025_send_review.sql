-- Review before send (issue 29, docs/email-pipeline.md "Review before send"):
-- email_send_policies: one inbox's send policy (no row: review off, no
--   recipient lists).
-- email_known_recipients: addresses an inbox may mail at once under
--   review "new_recipients" (approved by a reviewer or sent to before;
--   people who wrote in are found from retained mail and cached here).
-- email_send_reviews: a held send's review (why held, expiry, decision).
-- email_sends.approved_request: the version a reviewer approved with
--   edits (NULL: the request as the agent sent it); the original request
--   stays untouched.
-- email_sends.outcome gains awaiting_review, rejected and expired. SQLite
-- cannot alter a CHECK constraint, so email_sends is rebuilt (no table
-- references it, so dropping it cascades nowhere).

-- +goose Up
CREATE TABLE email_send_policies (
    endpoint_id TEXT PRIMARY KEY REFERENCES email_endpoints (id) ON DELETE CASCADE,
    company_id TEXT NOT NULL REFERENCES companies (id) ON DELETE CASCADE,
    review TEXT NOT NULL CHECK (review IN ('off', 'new_recipients', 'all')),
    allowed_recipients TEXT NOT NULL,
    blocked_recipients TEXT NOT NULL,
    review_expires_hours INTEGER NOT NULL,
    updated_at TIMESTAMP NOT NULL
);

CREATE TABLE email_known_recipients (
    endpoint_id TEXT NOT NULL REFERENCES email_endpoints (id) ON DELETE CASCADE,
    address TEXT NOT NULL,
    source TEXT NOT NULL,
    created_at TIMESTAMP NOT NULL,
    PRIMARY KEY (endpoint_id, address)
);

CREATE TABLE email_send_reviews (
    publication_id TEXT PRIMARY KEY REFERENCES email_publications (id) ON DELETE CASCADE,
    company_id TEXT NOT NULL REFERENCES companies (id) ON DELETE CASCADE,
    endpoint_id TEXT NOT NULL REFERENCES email_endpoints (id) ON DELETE CASCADE,
    status TEXT NOT NULL CHECK (status IN ('awaiting_review', 'approved', 'rejected', 'expired')),
    reasons TEXT NOT NULL,
    expires_at TIMESTAMP NOT NULL,
    decided_by_user_id TEXT,
    decision_reason TEXT,
    changes TEXT,
    decided_at TIMESTAMP,
    created_at TIMESTAMP NOT NULL
);
CREATE INDEX email_send_reviews_waiting ON email_send_reviews (status, expires_at);
CREATE INDEX email_send_reviews_company ON email_send_reviews (company_id, status, created_at);

CREATE TABLE email_sends_new (
    publication_id TEXT PRIMARY KEY REFERENCES email_publications (id) ON DELETE CASCADE,
    company_id TEXT NOT NULL REFERENCES companies (id) ON DELETE CASCADE,
    endpoint_id TEXT NOT NULL REFERENCES email_endpoints (id) ON DELETE CASCADE,
    request TEXT NOT NULL,
    actor TEXT NOT NULL,
    digest TEXT NOT NULL,
    outcome TEXT NOT NULL DEFAULT 'queued' CHECK (outcome IN ('queued', 'sent', 'delivered', 'failed', 'uncertain',
        'awaiting_review', 'rejected', 'expired')),
    attachments TEXT,
    first_attempt_at TIMESTAMP,
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NOT NULL,
    delivered_at TIMESTAMP,
    approved_request TEXT
);
INSERT INTO email_sends_new (publication_id, company_id, endpoint_id, request, actor, digest, outcome, attachments,
    first_attempt_at, created_at, updated_at, delivered_at)
SELECT publication_id, company_id, endpoint_id, request, actor, digest, outcome, attachments,
    first_attempt_at, created_at, updated_at, delivered_at FROM email_sends;
DROP TABLE email_sends;
ALTER TABLE email_sends_new RENAME TO email_sends;
CREATE INDEX email_sends_pending ON email_sends (endpoint_id, outcome) WHERE outcome IN ('queued', 'uncertain');

-- +goose Down
CREATE TABLE email_sends_old (
    publication_id TEXT PRIMARY KEY REFERENCES email_publications (id) ON DELETE CASCADE,
    company_id TEXT NOT NULL REFERENCES companies (id) ON DELETE CASCADE,
    endpoint_id TEXT NOT NULL REFERENCES email_endpoints (id) ON DELETE CASCADE,
    request TEXT NOT NULL,
    actor TEXT NOT NULL,
    digest TEXT NOT NULL,
    outcome TEXT NOT NULL DEFAULT 'queued' CHECK (outcome IN ('queued', 'sent', 'delivered', 'failed', 'uncertain')),
    attachments TEXT,
    first_attempt_at TIMESTAMP,
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NOT NULL,
    delivered_at TIMESTAMP
);
INSERT INTO email_sends_old SELECT publication_id, company_id, endpoint_id, request, actor, digest,
    CASE WHEN outcome IN ('awaiting_review', 'rejected', 'expired') THEN 'failed' ELSE outcome END,
    attachments, first_attempt_at, created_at, updated_at, delivered_at FROM email_sends;
DROP TABLE email_sends;
ALTER TABLE email_sends_old RENAME TO email_sends;
CREATE INDEX email_sends_pending ON email_sends (endpoint_id, outcome) WHERE outcome IN ('queued', 'uncertain');
DROP TABLE email_send_reviews;
DROP TABLE email_known_recipients;
DROP TABLE email_send_policies;
