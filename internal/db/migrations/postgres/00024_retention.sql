-- Data retention (docs/operations.md, "Retention"): per-company limits on
-- how long retained email content, run logs and the private directories of
-- done tasks are kept (NULL keeps them for ever, the default), the mark of
-- a message whose content was purged, and the lease that lets one replica
-- at a time run the daily purge.

-- +goose Up
CREATE TABLE retention_settings (
    company_id TEXT PRIMARY KEY REFERENCES companies (id) ON DELETE CASCADE,
    email_days INTEGER CHECK (email_days IS NULL OR email_days > 0),
    run_log_days INTEGER CHECK (run_log_days IS NULL OR run_log_days > 0),
    task_dir_days INTEGER CHECK (task_dir_days IS NULL OR task_dir_days > 0),
    updated_at TIMESTAMPTZ NOT NULL
);
ALTER TABLE email_messages ADD COLUMN content_purged_at TIMESTAMPTZ;
CREATE TABLE maintenance_leases (
    name TEXT PRIMARY KEY,
    holder TEXT NOT NULL DEFAULT '',
    expires_at TIMESTAMPTZ NOT NULL,
    last_done_at TIMESTAMPTZ
);

-- +goose Down
DROP TABLE maintenance_leases;
ALTER TABLE email_messages DROP COLUMN content_purged_at;
DROP TABLE retention_settings;
