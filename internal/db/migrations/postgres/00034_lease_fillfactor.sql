-- Socket and thread leases are rewritten all the time: every renewal
-- extends all of a replica's leases (10,000 rows a second for 10,000
-- inboxes on one replica) and every receiving transaction's fence
-- extends its thread lease. Migration 00017 dropped the expiry index so
-- those updates can be heap-only (HOT), but a HOT update needs room on
-- the row's own page, and at the default fill factor the pages are full:
-- measured, none of a renewal's updates were HOT, and each also wrote
-- the primary key index (a 10,000-row renewal took 45-90 ms of the
-- database's CPU every second; 11-12 ms at fill factor 50). Half of each
-- page is left free for the next versions. The setting applies to pages
-- written from now on; an existing table gets it as its pages are
-- rewritten (VACUUM FULL email_leases rewrites it at once; it is small).

-- +goose Up
ALTER TABLE email_leases SET (fillfactor = 50);

-- +goose Down
ALTER TABLE email_leases RESET (fillfactor);
