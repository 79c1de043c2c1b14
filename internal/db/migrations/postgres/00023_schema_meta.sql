-- Which binary last migrated the database, and to which schema version:
-- a binary older than the schema refuses to start and names both
-- (docs/deployment.md, "Upgrades"). One row, rewritten by every start
-- that applied migrations.

-- +goose Up
CREATE TABLE schema_meta (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    schema_version BIGINT NOT NULL,
    binary_version TEXT NOT NULL,
    migrated_at TIMESTAMPTZ NOT NULL
);

-- +goose Down
DROP TABLE schema_meta;
