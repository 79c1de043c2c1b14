-- The deliveries waiting for a later retry, by inbox and provider thread:
-- the scheduler holds a delivery back while an older one of its thread
-- waits (store.notHeldBack). Only waiting deliveries with a retry time are
-- in it, usually none, so that check never reads the inbox's history.

-- +goose Up
CREATE INDEX email_deliveries_held ON email_deliveries (endpoint_id, provider_thread_id, received_at)
    WHERE next_attempt_at IS NOT NULL AND state IN ('received', 'processing', 'retry');

-- +goose Down
DROP INDEX email_deliveries_held;
