-- Inbox health (docs/api.md, "Inbox health"): a problem observed outside
-- the receiving transports' own health columns (a failed setup, webhook
-- deliveries failing their signature check), kept apart so that a later
-- healthy catch-up does not erase it; the index that finds an agent's latest
-- runs; and the one that lists a company's sends newest first.

-- +goose Up
ALTER TABLE email_endpoints ADD COLUMN problem_code TEXT;
ALTER TABLE email_endpoints ADD COLUMN problem_message TEXT;
ALTER TABLE email_endpoints ADD COLUMN problem_at TIMESTAMP;
CREATE INDEX heartbeat_runs_agent_issue ON heartbeat_runs (agent_id, issue_id, created_at);
CREATE INDEX email_publications_company_created ON email_publications (company_id, created_at);

-- +goose Down
DROP INDEX email_publications_company_created;
DROP INDEX heartbeat_runs_agent_issue;
ALTER TABLE email_endpoints DROP COLUMN problem_at;
ALTER TABLE email_endpoints DROP COLUMN problem_message;
ALTER TABLE email_endpoints DROP COLUMN problem_code;
