-- Stage timestamps for measurements and live qualification:
-- email_sends.delivered_at is when a send's delivery receipt arrived, so
-- "sent -> delivered" can be measured per send (published_at records
-- "sent"); the index serves the per-task delivery listing.

-- +goose Up
ALTER TABLE email_sends ADD COLUMN delivered_at TIMESTAMP;
CREATE INDEX email_deliveries_conversation ON email_deliveries (conversation_id, received_at);

-- +goose Down
DROP INDEX email_deliveries_conversation;
ALTER TABLE email_sends DROP COLUMN delivered_at;
