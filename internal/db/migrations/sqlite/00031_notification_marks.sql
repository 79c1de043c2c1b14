-- Notification marks (docs/email-setup.md, "Notifications"): the last
-- state a notification event reported for one subject (an inbox's health,
-- its bounce rate, an agent's budget in a month). An event is emitted in
-- the transaction that moves a mark from the state it was read in (a
-- compare-and-set), so replicas that notice the same change emit it once,
-- and a state that flaps inside a mark's quiet period is not re-sent.
-- The delivery log pages by (created_at, id) newest first.

-- +goose Up
CREATE TABLE notification_marks (
    mark_key TEXT PRIMARY KEY,
    company_id TEXT NOT NULL REFERENCES companies (id) ON DELETE CASCADE,
    value TEXT NOT NULL,
    changed_at TIMESTAMP NOT NULL
);
CREATE INDEX notification_marks_company ON notification_marks (company_id);
CREATE INDEX notification_deliveries_webhook_created_id ON notification_deliveries (webhook_id, created_at, id);
CREATE INDEX notification_webhooks_company_created_id ON notification_webhooks (company_id, created_at, id);
DROP INDEX notification_deliveries_webhook;
DROP INDEX notification_webhooks_company;

-- +goose Down
CREATE INDEX notification_webhooks_company ON notification_webhooks (company_id);
CREATE INDEX notification_deliveries_webhook ON notification_deliveries (webhook_id, created_at);
DROP INDEX notification_webhooks_company_created_id;
DROP INDEX notification_deliveries_webhook_created_id;
DROP TABLE notification_marks;
