-- Search follows an email's update (docs/api.md, "Search"). SQLite's
-- migration 00033 adds the trigger that rewrites an email's search row
-- when retention or purge-sender empties its content; here migration
-- 00030's trigger already recomputes search_vector on update, so this
-- migration only keeps both databases at the same schema version.

-- +goose Up
SELECT 1;

-- +goose Down
SELECT 1;
