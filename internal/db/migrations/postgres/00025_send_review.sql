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
-- email_sends.outcome gains awaiting_review, rejected and expired.

-- +goose Up
CREATE TABLE email_send_policies (
    endpoint_id TEXT PRIMARY KEY REFERENCES email_endpoints (id) ON DELETE CASCADE,
    company_id TEXT NOT NULL REFERENCES companies (id) ON DELETE CASCADE,
    review TEXT NOT NULL CHECK (review IN ('off', 'new_recipients', 'all')),
    allowed_recipients TEXT NOT NULL,
    blocked_recipients TEXT NOT NULL,
    review_expires_hours INTEGER NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL
);

CREATE TABLE email_known_recipients (
    endpoint_id TEXT NOT NULL REFERENCES email_endpoints (id) ON DELETE CASCADE,
    address TEXT NOT NULL,
    source TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (endpoint_id, address)
);

CREATE TABLE email_send_reviews (
    publication_id TEXT PRIMARY KEY REFERENCES email_publications (id) ON DELETE CASCADE,
    company_id TEXT NOT NULL REFERENCES companies (id) ON DELETE CASCADE,
    endpoint_id TEXT NOT NULL REFERENCES email_endpoints (id) ON DELETE CASCADE,
    status TEXT NOT NULL CHECK (status IN ('awaiting_review', 'approved', 'rejected', 'expired')),
    reasons TEXT NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL,
    decided_by_user_id TEXT,
    decision_reason TEXT,
    changes TEXT,
    decided_at TIMESTAMPTZ,
    created_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX email_send_reviews_waiting ON email_send_reviews (status, expires_at);
CREATE INDEX email_send_reviews_company ON email_send_reviews (company_id, status, created_at);

ALTER TABLE email_sends ADD COLUMN approved_request TEXT;
ALTER TABLE email_sends DROP CONSTRAINT email_sends_outcome_check;
ALTER TABLE email_sends ADD CONSTRAINT email_sends_outcome_check CHECK (outcome IN ('queued', 'sent', 'delivered', 'failed',
    'uncertain', 'awaiting_review', 'rejected', 'expired'));

-- +goose Down
UPDATE email_sends SET outcome = 'failed' WHERE outcome IN ('awaiting_review', 'rejected', 'expired');
ALTER TABLE email_sends DROP CONSTRAINT email_sends_outcome_check;
ALTER TABLE email_sends ADD CONSTRAINT email_sends_outcome_check CHECK (outcome IN ('queued', 'sent', 'delivered', 'failed', 'uncertain'));
ALTER TABLE email_sends DROP COLUMN approved_request;
DROP TABLE email_send_reviews;
DROP TABLE email_known_recipients;
DROP TABLE email_send_policies;
