-- The indexes of the configuration listings paged since issue 31
-- (docs/api.md, "Paging"): companies, board keys, environments, secrets,
-- action policies, saved email credentials, and one task's inbound
-- deliveries. Each listing reads "WHERE <parent> = ? AND (t, id) <
-- (cursor) ORDER BY t DESC, id DESC LIMIT n" (deliveries oldest first),
-- which these serve as an index range read in order. The older
-- (conversation_id, received_at) index lacked the id tie-breaker.

-- +goose Up
CREATE INDEX companies_created_id ON companies (created_at, id);
CREATE INDEX board_api_keys_company_created_id ON board_api_keys (company_id, created_at, id);
CREATE INDEX board_api_keys_user_created_id ON board_api_keys (user_id, created_at, id);
CREATE INDEX board_api_keys_created_id ON board_api_keys (created_at, id);
CREATE INDEX environments_company_created_id ON environments (company_id, created_at, id);
CREATE INDEX company_secrets_company_created_id ON company_secrets (company_id, created_at, id);
CREATE INDEX action_policies_company_created_id ON action_policies (company_id, created_at, id);
CREATE INDEX email_connections_company_created_id ON email_connections (company_id, created_at, id);
CREATE INDEX email_deliveries_conversation_received_id ON email_deliveries (conversation_id, received_at, id);
DROP INDEX email_deliveries_conversation;

-- +goose Down
CREATE INDEX email_deliveries_conversation ON email_deliveries (conversation_id, received_at);
DROP INDEX email_deliveries_conversation_received_id;
DROP INDEX email_connections_company_created_id;
DROP INDEX action_policies_company_created_id;
DROP INDEX company_secrets_company_created_id;
DROP INDEX environments_company_created_id;
DROP INDEX board_api_keys_created_id;
DROP INDEX board_api_keys_user_created_id;
DROP INDEX board_api_keys_company_created_id;
DROP INDEX companies_created_id;
