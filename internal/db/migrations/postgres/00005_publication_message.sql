-- Receipts and thread reconciliation look a send up by the provider message
-- it produced; without this index every receipt scanned the whole outbox.

-- +goose Up
CREATE INDEX email_publications_provider_message ON email_publications (endpoint_id, provider_message_id);

-- +goose Down
DROP INDEX email_publications_provider_message;
