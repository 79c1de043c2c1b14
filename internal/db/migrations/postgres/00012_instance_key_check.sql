-- The master key check value: a known plaintext sealed with the instance
-- master key the first time a server starts on the database. A server whose
-- key cannot open it refuses to start (docs/operations.md, "Replicas and
-- the master key"), instead of failing on every secret later.

-- +goose Up
CREATE TABLE instance_key_check (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    key_id TEXT NOT NULL,
    sealed TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL
);

-- +goose Down
DROP TABLE instance_key_check;
