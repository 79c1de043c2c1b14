-- No query looks leases up by expiry alone: every read and write of
-- email_leases names its endpoint (the primary key) or its holder, and
-- the expiry is only a condition on rows found that way. The index cost
-- an entry on every lease write, and lease writes are hot: each receiving
-- transaction's fence extends its thread lease, and every renewal extends
-- all of a process's leases (1,000 socket leases for 1,000 inboxes).
-- Without it, PostgreSQL can make those updates heap-only (HOT): no index
-- changes at all, since neither expires_at nor updated_at is indexed.

-- +goose Up
DROP INDEX email_leases_expiry;

-- +goose Down
CREATE INDEX email_leases_expiry ON email_leases (expires_at);
