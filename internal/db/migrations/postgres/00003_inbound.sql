-- Inbound email pipeline: work indexes for the per-endpoint delivery queue.
-- The processing worker selects an endpoint's due deliveries in admission
-- order and checks, per provider thread, whether an older delivery of the
-- same thread is still pending (per-thread FIFO); both scans stay on an
-- index instead of walking the whole queue.

-- +goose Up
CREATE INDEX email_deliveries_endpoint_work ON email_deliveries (endpoint_id, state, received_at);
CREATE INDEX email_deliveries_endpoint_thread ON email_deliveries (endpoint_id, provider_thread_id, received_at);
CREATE INDEX email_message_links_message ON email_message_links (endpoint_id, provider_message_id);

-- +goose Down
DROP INDEX email_message_links_message;
DROP INDEX email_deliveries_endpoint_thread;
DROP INDEX email_deliveries_endpoint_work;
