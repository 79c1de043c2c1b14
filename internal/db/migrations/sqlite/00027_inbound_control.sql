-- Who may write to an agent (issue 30).
-- email_sender_rules: an inbox's receive/reply allow and block lists as
--   Paperclip manages them (rules: JSON), with the state of their sync to
--   AgentMail's inbox-scoped lists. version grows with every change;
--   synced_version is the version last written to AgentMail, so a sync
--   that raced a newer change never marks it synced. drift holds
--   AgentMail's entries when the last drift check found them different.
-- email_quarantine: every inbound message that did not become work, with
--   its reason; body_text is purged after PAPERCLIP_QUARANTINE_DAYS.
--   released_at/by record a release (at most once: the delivery is
--   reprocessed as admission would have).
-- email_suppressions.source_message_id: the provider message whose
--   bounce or complaint suppressed the address.

-- +goose Up
CREATE TABLE email_sender_rules (
    endpoint_id TEXT PRIMARY KEY REFERENCES email_endpoints (id) ON DELETE CASCADE,
    company_id TEXT NOT NULL REFERENCES companies (id) ON DELETE CASCADE,
    rules TEXT NOT NULL,
    version INTEGER NOT NULL,
    synced_version INTEGER NOT NULL DEFAULT 0,
    sync_state TEXT NOT NULL CHECK (sync_state IN ('pending', 'synced', 'failed')),
    sync_error TEXT,
    sync_attempts INTEGER NOT NULL DEFAULT 0,
    next_sync_at TIMESTAMP,
    last_synced_at TIMESTAMP,
    drift TEXT,
    drift_checked_at TIMESTAMP,
    updated_at TIMESTAMP NOT NULL
);
CREATE INDEX email_sender_rules_due ON email_sender_rules (sync_state, next_sync_at);

CREATE TABLE email_quarantine (
    id TEXT PRIMARY KEY,
    company_id TEXT NOT NULL REFERENCES companies (id) ON DELETE CASCADE,
    endpoint_id TEXT NOT NULL REFERENCES email_endpoints (id) ON DELETE CASCADE,
    delivery_id TEXT NOT NULL UNIQUE REFERENCES email_deliveries (id) ON DELETE CASCADE,
    provider_message_id TEXT NOT NULL,
    provider_thread_id TEXT NOT NULL,
    from_address TEXT NOT NULL,
    subject TEXT NOT NULL,
    received_at TIMESTAMP NOT NULL,
    reason TEXT NOT NULL,
    detail TEXT NOT NULL,
    body_text TEXT,
    released_at TIMESTAMP,
    released_by TEXT,
    purged_at TIMESTAMP,
    created_at TIMESTAMP NOT NULL
);
CREATE INDEX email_quarantine_company ON email_quarantine (company_id, created_at, id);
CREATE INDEX email_quarantine_endpoint ON email_quarantine (endpoint_id, created_at, id);

ALTER TABLE email_suppressions ADD COLUMN source_message_id TEXT;

-- +goose Down
ALTER TABLE email_suppressions DROP COLUMN source_message_id;
DROP TABLE email_quarantine;
DROP TABLE email_sender_rules;
