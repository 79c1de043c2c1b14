-- Attachment content in the database, so every replica can serve and send
-- what any replica took in. A blob is keyed by the sha256 of its bytes
-- (attachments.sha256 names it) and stored as ordered chunks of at most
-- 256 KiB, so neither a write nor a read ever holds a whole file in one
-- value: an upload inserts chunk after chunk, a download fetches them one
-- statement at a time. The blob row is inserted with its chunks in one
-- transaction, so a visible blob is complete. There is no foreign key from
-- attachments: rows written before this migration name files in a home
-- until the server backfills them (internal/attachment).

-- +goose Up
CREATE TABLE attachment_blobs (
    sha256 TEXT PRIMARY KEY,
    size_bytes BIGINT NOT NULL CHECK (size_bytes >= 0),
    created_at TIMESTAMPTZ NOT NULL
);
CREATE TABLE attachment_blob_chunks (
    sha256 TEXT NOT NULL REFERENCES attachment_blobs (sha256) ON DELETE CASCADE,
    seq INTEGER NOT NULL CHECK (seq >= 0),
    data BYTEA NOT NULL,
    PRIMARY KEY (sha256, seq)
);
-- EXTERNAL: out of line (TOAST) but never compressed. Attachments are
-- mostly compressed formats already (PDF, images, zip, Office files), so
-- pglz would spend CPU on every write for nothing and on every read of
-- the few that shrink.
ALTER TABLE attachment_blob_chunks ALTER COLUMN data SET STORAGE EXTERNAL;
-- The backfill looks for attachment rows whose blob is missing.
CREATE INDEX attachments_sha256 ON attachments (sha256);

-- +goose Down
DROP INDEX attachments_sha256;
DROP TABLE attachment_blob_chunks;
DROP TABLE attachment_blobs;
