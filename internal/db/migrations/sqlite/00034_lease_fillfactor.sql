-- PostgreSQL's migration 00034 leaves half of each email_leases page free
-- so that lease renewals can update rows in place (heap-only tuples).
-- SQLite has no fill factor and rewrites a row in its B-tree page anyway,
-- so this migration only keeps both databases at the same schema version.

-- +goose Up
SELECT 1;

-- +goose Down
SELECT 1;
