-- Replica membership of the inbound workers (docs/email-pipeline.md,
-- "Leases"): every process on a shared database upserts its row in its
-- batch lease renewal, so each knows how many replicas share the sockets
-- and holds no more than its share plus a small slack.

-- +goose Up
CREATE TABLE email_replicas (
    holder TEXT PRIMARY KEY,
    expires_at TIMESTAMPTZ NOT NULL
);

-- +goose Down
DROP TABLE email_replicas;
