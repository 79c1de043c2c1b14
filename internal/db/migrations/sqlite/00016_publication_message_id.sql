-- Own-mail recognition looks a provider message up among the sends of the
-- whole company (mail from one of its inboxes to another). With only the
-- (endpoint_id, provider_message_id) index that lookup probed once per
-- inbox of the company, so the cost of every received email grew with the
-- number of inboxes; this index finds the message first.

-- +goose Up
CREATE INDEX email_publications_provider_message_id ON email_publications (provider_message_id);

-- +goose Down
DROP INDEX email_publications_provider_message_id;
