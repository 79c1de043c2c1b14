-- AgentMail email channel: saved credentials with human grants and agent
-- installs, inbox endpoints with their receiving state, conversations (one
-- per provider thread), retained messages, the durable inbound queue, the
-- outbound outbox with immutable send intents, message links and leases.

-- +goose Up
CREATE TABLE email_connections (
    id TEXT PRIMARY KEY,
    company_id TEXT NOT NULL REFERENCES companies (id) ON DELETE CASCADE,
    idempotency_key TEXT NOT NULL,
    name TEXT NOT NULL DEFAULT 'AgentMail',
    scope TEXT NOT NULL DEFAULT '' CHECK (scope IN ('organization', 'pod', 'inbox', '')),
    inbox_id TEXT,
    organization_id TEXT,
    status TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'disabled')),
    initial_install_ids TEXT,
    created_by_user_id TEXT,
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NOT NULL,
    UNIQUE (company_id, idempotency_key)
);

CREATE TABLE email_connection_grants (
    id TEXT PRIMARY KEY,
    company_id TEXT NOT NULL REFERENCES companies (id) ON DELETE CASCADE,
    connection_id TEXT NOT NULL REFERENCES email_connections (id) ON DELETE CASCADE,
    kind TEXT NOT NULL CHECK (kind IN ('user', 'organization')),
    subject_user_id TEXT,
    status TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'revoked')),
    created_at TIMESTAMP NOT NULL,
    revoked_at TIMESTAMP
);
CREATE INDEX email_connection_grants_connection ON email_connection_grants (connection_id);

CREATE TABLE email_connection_installs (
    id TEXT PRIMARY KEY,
    company_id TEXT NOT NULL REFERENCES companies (id) ON DELETE CASCADE,
    connection_id TEXT NOT NULL REFERENCES email_connections (id) ON DELETE CASCADE,
    target_type TEXT NOT NULL CHECK (target_type IN ('company', 'agent')),
    target_id TEXT NOT NULL,
    created_at TIMESTAMP NOT NULL,
    UNIQUE (connection_id, target_type, target_id)
);

CREATE TABLE email_endpoints (
    id TEXT PRIMARY KEY,
    company_id TEXT NOT NULL REFERENCES companies (id) ON DELETE CASCADE,
    public_id TEXT NOT NULL UNIQUE,
    provider TEXT NOT NULL DEFAULT 'agentmail' CHECK (provider = 'agentmail'),
    publication_mode TEXT NOT NULL DEFAULT 'explicit' CHECK (publication_mode = 'explicit'),
    assigned_agent_id TEXT NOT NULL REFERENCES agents (id) ON DELETE RESTRICT,
    sponsor_user_id TEXT,
    credential_connection_id TEXT REFERENCES email_connections (id) ON DELETE SET NULL,
    status TEXT NOT NULL DEFAULT 'draft' CHECK (status IN ('draft', 'active', 'paused', 'archived')),
    address TEXT,
    display_name TEXT NOT NULL DEFAULT '',
    provider_account_id TEXT,
    receive_mode TEXT NOT NULL DEFAULT 'websocket' CHECK (receive_mode IN ('websocket', 'webhook')),
    webhook_id TEXT,
    owned_api_key_id TEXT,
    activation_at TIMESTAMP,
    sync_checkpoint TIMESTAMP,
    last_sync_at TIMESTAMP,
    health_message TEXT NOT NULL DEFAULT '',
    last_error TEXT,
    last_event_at TIMESTAMP,
    last_publication_at TIMESTAMP,
    activated_at TIMESTAMP,
    archived_at TIMESTAMP,
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NOT NULL
);
-- One non-archived Paperclip endpoint per provider inbox across the instance.
CREATE UNIQUE INDEX email_endpoints_inbox_uq ON email_endpoints (address) WHERE status <> 'archived' AND address IS NOT NULL;
CREATE INDEX email_endpoints_company ON email_endpoints (company_id);
CREATE INDEX email_endpoints_agent ON email_endpoints (assigned_agent_id);

CREATE TABLE email_conversations (
    id TEXT PRIMARY KEY,
    company_id TEXT NOT NULL REFERENCES companies (id) ON DELETE CASCADE,
    endpoint_id TEXT NOT NULL REFERENCES email_endpoints (id) ON DELETE CASCADE,
    issue_id TEXT NOT NULL REFERENCES issues (id) ON DELETE RESTRICT,
    external_conversation_id TEXT NOT NULL,
    external_thread_id TEXT NOT NULL,
    subject TEXT NOT NULL DEFAULT '',
    state TEXT NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'waiting', 'completed', 'unavailable', 'endpoint_removed')),
    last_activity_at TIMESTAMP NOT NULL,
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NOT NULL,
    UNIQUE (endpoint_id, external_thread_id)
);
CREATE INDEX email_conversations_issue ON email_conversations (issue_id);

CREATE TABLE email_messages (
    id TEXT PRIMARY KEY,
    company_id TEXT NOT NULL REFERENCES companies (id) ON DELETE CASCADE,
    endpoint_id TEXT NOT NULL REFERENCES email_endpoints (id) ON DELETE CASCADE,
    conversation_id TEXT NOT NULL REFERENCES email_conversations (id) ON DELETE CASCADE,
    provider_message_id TEXT NOT NULL,
    provider_thread_id TEXT NOT NULL DEFAULT '',
    envelope TEXT NOT NULL,
    headers TEXT,
    text TEXT NOT NULL,
    full_text TEXT NOT NULL DEFAULT '',
    direction TEXT NOT NULL CHECK (direction IN ('inbound', 'outbound')),
    automatic BOOLEAN NOT NULL DEFAULT FALSE,
    attachment_ids TEXT NOT NULL,
    comment_id TEXT,
    timestamp TIMESTAMP NOT NULL,
    created_at TIMESTAMP NOT NULL,
    UNIQUE (endpoint_id, provider_message_id)
);
CREATE INDEX email_messages_conversation ON email_messages (company_id, conversation_id, timestamp);

CREATE TABLE email_deliveries (
    id TEXT PRIMARY KEY,
    company_id TEXT NOT NULL REFERENCES companies (id) ON DELETE CASCADE,
    endpoint_id TEXT NOT NULL REFERENCES email_endpoints (id) ON DELETE CASCADE,
    conversation_id TEXT REFERENCES email_conversations (id) ON DELETE SET NULL,
    provider_event_id TEXT NOT NULL,
    deduplication_key TEXT NOT NULL,
    event_kind TEXT NOT NULL,
    source TEXT NOT NULL DEFAULT '',
    provider_thread_id TEXT,
    normalized_event TEXT NOT NULL,
    state TEXT NOT NULL DEFAULT 'received' CHECK (state IN ('received', 'filtered', 'processing', 'processed', 'retry', 'failed')),
    attempts INTEGER NOT NULL DEFAULT 0,
    redacted_error TEXT,
    next_attempt_at TIMESTAMP,
    received_at TIMESTAMP NOT NULL,
    processed_at TIMESTAMP,
    admission_to_wake_ms BIGINT,
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NOT NULL,
    UNIQUE (endpoint_id, provider_event_id),
    UNIQUE (endpoint_id, deduplication_key)
);
CREATE INDEX email_deliveries_work ON email_deliveries (state, next_attempt_at);

CREATE TABLE email_publications (
    id TEXT PRIMARY KEY,
    company_id TEXT NOT NULL REFERENCES companies (id) ON DELETE CASCADE,
    endpoint_id TEXT NOT NULL REFERENCES email_endpoints (id) ON DELETE CASCADE,
    conversation_id TEXT NOT NULL REFERENCES email_conversations (id) ON DELETE CASCADE,
    issue_id TEXT NOT NULL REFERENCES issues (id) ON DELETE RESTRICT,
    idempotency_key TEXT NOT NULL,
    payload TEXT NOT NULL,
    state TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'streaming', 'published', 'retry', 'delivery_unknown', 'failed', 'cancelled')),
    provider_message_id TEXT,
    provider_thread_id TEXT,
    attempts INTEGER NOT NULL DEFAULT 0,
    redacted_error TEXT,
    next_attempt_at TIMESTAMP,
    published_at TIMESTAMP,
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NOT NULL,
    UNIQUE (company_id, idempotency_key)
);
CREATE INDEX email_publications_work ON email_publications (state, next_attempt_at);
CREATE INDEX email_publications_conversation ON email_publications (conversation_id, created_at);

CREATE TABLE email_sends (
    publication_id TEXT PRIMARY KEY REFERENCES email_publications (id) ON DELETE CASCADE,
    company_id TEXT NOT NULL REFERENCES companies (id) ON DELETE CASCADE,
    endpoint_id TEXT NOT NULL REFERENCES email_endpoints (id) ON DELETE CASCADE,
    request TEXT NOT NULL,
    actor TEXT NOT NULL,
    digest TEXT NOT NULL,
    outcome TEXT NOT NULL DEFAULT 'queued' CHECK (outcome IN ('queued', 'sent', 'delivered', 'failed', 'uncertain')),
    attachments TEXT,
    first_attempt_at TIMESTAMP,
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NOT NULL
);
CREATE INDEX email_sends_pending ON email_sends (endpoint_id, outcome) WHERE outcome IN ('queued', 'uncertain');

CREATE TABLE email_message_links (
    id TEXT PRIMARY KEY,
    company_id TEXT NOT NULL REFERENCES companies (id) ON DELETE CASCADE,
    endpoint_id TEXT NOT NULL REFERENCES email_endpoints (id) ON DELETE CASCADE,
    conversation_id TEXT NOT NULL REFERENCES email_conversations (id) ON DELETE CASCADE,
    delivery_id TEXT REFERENCES email_deliveries (id) ON DELETE SET NULL,
    publication_id TEXT,
    comment_id TEXT,
    provider_message_id TEXT NOT NULL,
    direction TEXT NOT NULL CHECK (direction IN ('inbound', 'outbound')),
    created_at TIMESTAMP NOT NULL,
    UNIQUE (endpoint_id, conversation_id, provider_message_id)
);

CREATE TABLE email_leases (
    endpoint_id TEXT NOT NULL REFERENCES email_endpoints (id) ON DELETE CASCADE,
    lease_key TEXT NOT NULL,
    company_id TEXT NOT NULL,
    token TEXT NOT NULL,
    holder TEXT NOT NULL DEFAULT '',
    expires_at TIMESTAMP NOT NULL,
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NOT NULL,
    PRIMARY KEY (endpoint_id, lease_key)
);
CREATE INDEX email_leases_expiry ON email_leases (expires_at);

-- +goose Down
DROP TABLE email_leases;
DROP TABLE email_message_links;
DROP TABLE email_sends;
DROP TABLE email_publications;
DROP TABLE email_deliveries;
DROP TABLE email_messages;
DROP TABLE email_conversations;
DROP TABLE email_endpoints;
DROP TABLE email_connection_installs;
DROP TABLE email_connection_grants;
DROP TABLE email_connections;
