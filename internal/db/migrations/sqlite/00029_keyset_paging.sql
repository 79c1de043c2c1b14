-- The indexes of the keyset-paged listings (docs/api.md, "Paging"): each
-- listing reads "WHERE <parent> = ? AND (t, id) < (cursor) ORDER BY t DESC,
-- id DESC LIMIT n", which these serve as an index range read in order, so
-- a page costs the same on the first page and the thousandth. The older
-- (parent, created_at) indexes they replace lacked the id tie-breaker.

-- +goose Up
CREATE INDEX issues_company_created_id ON issues (company_id, created_at, id);
CREATE INDEX issues_company_updated_id ON issues (company_id, updated_at, id);
CREATE INDEX issue_comments_issue_created_id ON issue_comments (issue_id, created_at, id);
CREATE INDEX attachments_issue_created_id ON attachments (issue_id, created_at, id);
CREATE INDEX activity_log_company_created_id ON activity_log (company_id, created_at, id);
CREATE INDEX activity_log_entity ON activity_log (entity_id, created_at);
CREATE INDEX heartbeat_runs_company_created_id ON heartbeat_runs (company_id, created_at, id);
CREATE INDEX agents_company_created_id ON agents (company_id, created_at, id);
CREATE INDEX projects_company_created_id ON projects (company_id, created_at, id);
CREATE INDEX company_memberships_company_created ON company_memberships (company_id, created_at, user_id);
CREATE INDEX email_endpoints_company_created_id ON email_endpoints (company_id, created_at, id);
CREATE INDEX email_conversations_endpoint_activity ON email_conversations (endpoint_id, last_activity_at, id);
CREATE INDEX email_conversations_endpoint_issue ON email_conversations (endpoint_id, issue_id);
CREATE INDEX email_deliveries_endpoint_received_id ON email_deliveries (endpoint_id, received_at, id);
CREATE INDEX email_publications_endpoint_created_id ON email_publications (endpoint_id, created_at, id);
DROP INDEX issues_company_created;
DROP INDEX issue_comments_issue;
DROP INDEX attachments_issue;
DROP INDEX activity_log_company_created;
DROP INDEX heartbeat_runs_company_created;

-- Short task identifiers per company (ACME-12): the company's prefix and
-- counter, each task's number and identifier (prefix-number, kept on the
-- task so a lookup is one index read). Existing tasks are numbered in
-- creation order; new ones take the next number of their company
-- (store.CreateIssue).
ALTER TABLE companies ADD COLUMN issue_prefix TEXT NOT NULL DEFAULT '';
ALTER TABLE companies ADD COLUMN issue_counter INTEGER NOT NULL DEFAULT 0;
ALTER TABLE issues ADD COLUMN number INTEGER;
ALTER TABLE issues ADD COLUMN identifier TEXT;
UPDATE companies SET issue_prefix = COALESCE(NULLIF(upper(substr(replace(replace(replace(replace(replace(replace(name, ' ', ''), '-', ''), '.', ''), '_', ''), '&', ''), ',', ''), 1, 4)), ''), 'TASK');
UPDATE issues SET number = r.rn FROM (SELECT id, ROW_NUMBER() OVER (PARTITION BY company_id ORDER BY created_at, id) AS rn FROM issues) r
    WHERE r.id = issues.id;
UPDATE issues SET identifier = (SELECT c.issue_prefix FROM companies c WHERE c.id = issues.company_id) || '-' || number;
UPDATE companies SET issue_counter = COALESCE((SELECT MAX(i.number) FROM issues i WHERE i.company_id = companies.id), 0);
CREATE UNIQUE INDEX issues_company_number ON issues (company_id, number);
CREATE INDEX issues_identifier ON issues (identifier);

-- +goose Down
DROP INDEX issues_identifier;
DROP INDEX issues_company_number;
ALTER TABLE issues DROP COLUMN identifier;
ALTER TABLE issues DROP COLUMN number;
ALTER TABLE companies DROP COLUMN issue_counter;
ALTER TABLE companies DROP COLUMN issue_prefix;
CREATE INDEX heartbeat_runs_company_created ON heartbeat_runs (company_id, created_at);
CREATE INDEX activity_log_company_created ON activity_log (company_id, created_at);
CREATE INDEX attachments_issue ON attachments (issue_id, created_at);
CREATE INDEX issue_comments_issue ON issue_comments (issue_id, created_at);
CREATE INDEX issues_company_created ON issues (company_id, created_at);
DROP INDEX email_publications_endpoint_created_id;
DROP INDEX email_deliveries_endpoint_received_id;
DROP INDEX email_conversations_endpoint_issue;
DROP INDEX email_conversations_endpoint_activity;
DROP INDEX email_endpoints_company_created_id;
DROP INDEX company_memberships_company_created;
DROP INDEX projects_company_created_id;
DROP INDEX agents_company_created_id;
DROP INDEX heartbeat_runs_company_created_id;
DROP INDEX activity_log_entity;
DROP INDEX activity_log_company_created_id;
DROP INDEX attachments_issue_created_id;
DROP INDEX issue_comments_issue_created_id;
DROP INDEX issues_company_updated_id;
DROP INDEX issues_company_created_id;
