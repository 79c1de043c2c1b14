-- Outbound email: loop guards and delivery safety.
-- email_suppressions: recipients that bounced permanently (or complained)
--   are refused fast instead of being mailed again.
-- action_rate_hits: buckets for the built-in send caps (per thread, per
--   recipient), counted like action-policy rate limits.
-- email_endpoints.auto_submitted: whether agent-authored mail carries
--   Auto-Submitted / X-Auto-Response-Suppress (on by default).

-- +goose Up
CREATE TABLE email_suppressions (
    endpoint_id TEXT NOT NULL REFERENCES email_endpoints (id) ON DELETE CASCADE,
    address TEXT NOT NULL,
    company_id TEXT NOT NULL,
    reason TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (endpoint_id, address)
);

CREATE TABLE action_rate_hits (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    company_id TEXT NOT NULL REFERENCES companies (id) ON DELETE CASCADE,
    bucket TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX action_rate_hits_bucket ON action_rate_hits (bucket, created_at);

ALTER TABLE email_endpoints ADD COLUMN auto_submitted BOOLEAN NOT NULL DEFAULT TRUE;

-- +goose Down
ALTER TABLE email_endpoints DROP COLUMN auto_submitted;
DROP TABLE action_rate_hits;
DROP TABLE email_suppressions;
