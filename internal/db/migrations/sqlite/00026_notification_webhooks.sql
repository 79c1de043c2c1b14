-- Company notification webhooks (issue 29, docs/email-setup.md
-- "Notifications"): notification_webhooks are the subscriptions (the
-- signing secret sealed by the vault, never shown again);
-- notification_deliveries is the durable outbox, one row per event and
-- webhook, written in the transaction of the change it reports and retried
-- with backoff for 24 hours.

-- +goose Up
CREATE TABLE notification_webhooks (
    id TEXT PRIMARY KEY,
    company_id TEXT NOT NULL REFERENCES companies (id) ON DELETE CASCADE,
    url TEXT NOT NULL,
    events TEXT NOT NULL,
    format TEXT NOT NULL CHECK (format IN ('standard', 'slack')),
    secret_sealed TEXT NOT NULL,
    private_allowed BOOLEAN NOT NULL DEFAULT FALSE,
    created_by TEXT NOT NULL DEFAULT '',
    created_at TIMESTAMP NOT NULL
);
CREATE INDEX notification_webhooks_company ON notification_webhooks (company_id);

CREATE TABLE notification_deliveries (
    id TEXT PRIMARY KEY,
    company_id TEXT NOT NULL REFERENCES companies (id) ON DELETE CASCADE,
    webhook_id TEXT NOT NULL REFERENCES notification_webhooks (id) ON DELETE CASCADE,
    event TEXT NOT NULL,
    payload TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('pending', 'delivered', 'failed')),
    attempts INTEGER NOT NULL DEFAULT 0,
    next_attempt_at TIMESTAMP,
    last_status INTEGER,
    last_error TEXT,
    created_at TIMESTAMP NOT NULL,
    delivered_at TIMESTAMP
);
CREATE INDEX notification_deliveries_due ON notification_deliveries (next_attempt_at) WHERE state = 'pending';
CREATE INDEX notification_deliveries_webhook ON notification_deliveries (webhook_id, created_at);

-- +goose Down
DROP TABLE notification_deliveries;
DROP TABLE notification_webhooks;
