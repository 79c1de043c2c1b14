-- Core control-plane schema: companies, users, agents, tasks, runs, audit,
-- policies and the secrets vault. Times are always bound from Go in UTC.

-- +goose Up
CREATE TABLE instance_settings (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    settings TEXT NOT NULL,
    updated_at TIMESTAMP NOT NULL
);

CREATE TABLE users (
    id TEXT PRIMARY KEY,
    email TEXT NOT NULL UNIQUE,
    name TEXT NOT NULL DEFAULT '',
    is_instance_admin BOOLEAN NOT NULL DEFAULT FALSE,
    created_at TIMESTAMP NOT NULL
);

CREATE TABLE companies (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NOT NULL
);

CREATE TABLE company_memberships (
    company_id TEXT NOT NULL REFERENCES companies (id) ON DELETE CASCADE,
    user_id TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    role TEXT NOT NULL CHECK (role IN ('owner', 'admin', 'member', 'viewer')),
    permissions TEXT NOT NULL,
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NOT NULL,
    PRIMARY KEY (company_id, user_id)
);
CREATE INDEX company_memberships_user ON company_memberships (user_id);

CREATE TABLE board_api_keys (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    company_id TEXT REFERENCES companies (id) ON DELETE CASCADE,
    name TEXT NOT NULL DEFAULT '',
    token_hash TEXT NOT NULL UNIQUE,
    created_at TIMESTAMP NOT NULL,
    last_used_at TIMESTAMP,
    revoked_at TIMESTAMP
);

CREATE TABLE environments (
    id TEXT PRIMARY KEY,
    company_id TEXT NOT NULL REFERENCES companies (id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    driver TEXT NOT NULL CHECK (driver IN ('local', 'sandbox')),
    provider TEXT NOT NULL DEFAULT '',
    status TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'inactive', 'error')),
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NOT NULL
);
CREATE INDEX environments_company ON environments (company_id);

CREATE TABLE agents (
    id TEXT PRIMARY KEY,
    company_id TEXT NOT NULL REFERENCES companies (id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('active', 'paused', 'terminated', 'pending_approval')),
    adapter_type TEXT NOT NULL CHECK (adapter_type IN ('process', 'http')),
    adapter_config TEXT NOT NULL,
    permissions TEXT NOT NULL,
    budget_monthly_cents BIGINT NOT NULL DEFAULT 0,
    spent_monthly_cents BIGINT NOT NULL DEFAULT 0,
    spend_period TEXT NOT NULL DEFAULT '',
    environment_id TEXT REFERENCES environments (id) ON DELETE SET NULL,
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NOT NULL
);
CREATE INDEX agents_company ON agents (company_id);

CREATE TABLE projects (
    id TEXT PRIMARY KEY,
    company_id TEXT NOT NULL REFERENCES companies (id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    workspace TEXT,
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NOT NULL
);
CREATE INDEX projects_company ON projects (company_id);

CREATE TABLE issues (
    id TEXT PRIMARY KEY,
    company_id TEXT NOT NULL REFERENCES companies (id) ON DELETE CASCADE,
    title TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    status TEXT NOT NULL CHECK (status IN ('backlog', 'todo', 'in_progress', 'in_review', 'blocked', 'done', 'cancelled')),
    priority TEXT NOT NULL DEFAULT 'medium' CHECK (priority IN ('critical', 'high', 'medium', 'low')),
    assignee_agent_id TEXT REFERENCES agents (id) ON DELETE SET NULL,
    parent_id TEXT REFERENCES issues (id) ON DELETE SET NULL,
    project_id TEXT REFERENCES projects (id) ON DELETE SET NULL,
    origin_kind TEXT NOT NULL DEFAULT 'manual',
    origin_id TEXT,
    idempotency_key TEXT,
    execution_workspace_settings TEXT,
    execution_run_id TEXT,
    checkout_run_id TEXT,
    responsible_user_id TEXT REFERENCES users (id) ON DELETE SET NULL,
    created_by_user_id TEXT REFERENCES users (id) ON DELETE SET NULL,
    created_by_agent_id TEXT REFERENCES agents (id) ON DELETE SET NULL,
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NOT NULL,
    completed_at TIMESTAMP,
    cancelled_at TIMESTAMP
);
CREATE UNIQUE INDEX issues_company_idempotency ON issues (company_id, idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX issues_company_created ON issues (company_id, created_at);
CREATE INDEX issues_assignee ON issues (assignee_agent_id);
CREATE INDEX issues_parent ON issues (parent_id);

CREATE TABLE issue_comments (
    id TEXT PRIMARY KEY,
    company_id TEXT NOT NULL REFERENCES companies (id) ON DELETE CASCADE,
    issue_id TEXT NOT NULL REFERENCES issues (id) ON DELETE CASCADE,
    body TEXT NOT NULL,
    author_kind TEXT NOT NULL CHECK (author_kind IN ('user', 'agent', 'system')),
    author_agent_id TEXT REFERENCES agents (id) ON DELETE SET NULL,
    author_user_id TEXT REFERENCES users (id) ON DELETE SET NULL,
    run_id TEXT,
    created_at TIMESTAMP NOT NULL
);
CREATE INDEX issue_comments_issue ON issue_comments (issue_id, created_at);

CREATE TABLE attachments (
    id TEXT PRIMARY KEY,
    company_id TEXT NOT NULL REFERENCES companies (id) ON DELETE CASCADE,
    issue_id TEXT NOT NULL REFERENCES issues (id) ON DELETE CASCADE,
    filename TEXT NOT NULL,
    content_type TEXT NOT NULL,
    size_bytes BIGINT NOT NULL,
    sha256 TEXT NOT NULL,
    created_by_user_id TEXT,
    created_by_agent_id TEXT,
    created_at TIMESTAMP NOT NULL
);
CREATE INDEX attachments_issue ON attachments (issue_id, created_at);

CREATE TABLE activity_log (
    id TEXT PRIMARY KEY,
    company_id TEXT REFERENCES companies (id) ON DELETE CASCADE,
    actor_kind TEXT NOT NULL,
    actor_id TEXT NOT NULL DEFAULT '',
    agent_id TEXT,
    run_id TEXT,
    action TEXT NOT NULL,
    entity_type TEXT NOT NULL DEFAULT '',
    entity_id TEXT NOT NULL DEFAULT '',
    details TEXT NOT NULL,
    created_at TIMESTAMP NOT NULL
);
CREATE INDEX activity_log_company_created ON activity_log (company_id, created_at);

CREATE TABLE action_policies (
    id TEXT PRIMARY KEY,
    company_id TEXT NOT NULL REFERENCES companies (id) ON DELETE CASCADE,
    action TEXT NOT NULL,
    actor_kind TEXT NOT NULL DEFAULT '*' CHECK (actor_kind IN ('*', 'user', 'agent')),
    actor_id TEXT NOT NULL DEFAULT '*',
    effect TEXT NOT NULL CHECK (effect IN ('allow', 'deny')),
    rate_limit_count INTEGER,
    rate_limit_window_seconds INTEGER,
    reason TEXT NOT NULL DEFAULT '',
    created_at TIMESTAMP NOT NULL
);
CREATE INDEX action_policies_company_action ON action_policies (company_id, action);

CREATE TABLE action_policy_hits (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    policy_id TEXT NOT NULL REFERENCES action_policies (id) ON DELETE CASCADE,
    actor_key TEXT NOT NULL,
    created_at TIMESTAMP NOT NULL
);
CREATE INDEX action_policy_hits_window ON action_policy_hits (policy_id, actor_key, created_at);

CREATE TABLE company_secrets (
    id TEXT PRIMARY KEY,
    company_id TEXT NOT NULL REFERENCES companies (id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    provider TEXT NOT NULL DEFAULT 'local_encrypted',
    status TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'deleted')),
    latest_version INTEGER NOT NULL,
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NOT NULL,
    deleted_at TIMESTAMP
);
CREATE UNIQUE INDEX company_secrets_active_name ON company_secrets (company_id, name) WHERE status = 'active';

CREATE TABLE company_secret_versions (
    secret_id TEXT NOT NULL REFERENCES company_secrets (id) ON DELETE CASCADE,
    version INTEGER NOT NULL,
    sealed TEXT NOT NULL,
    created_at TIMESTAMP NOT NULL,
    PRIMARY KEY (secret_id, version)
);

CREATE TABLE company_secret_bindings (
    id TEXT PRIMARY KEY,
    company_id TEXT NOT NULL REFERENCES companies (id) ON DELETE CASCADE,
    secret_id TEXT NOT NULL REFERENCES company_secrets (id) ON DELETE CASCADE,
    target_type TEXT NOT NULL,
    target_id TEXT NOT NULL,
    config_path TEXT NOT NULL,
    version_selector TEXT NOT NULL DEFAULT 'latest',
    required BOOLEAN NOT NULL DEFAULT TRUE,
    created_at TIMESTAMP NOT NULL,
    UNIQUE (target_type, target_id, config_path)
);
CREATE INDEX company_secret_bindings_secret ON company_secret_bindings (secret_id);

CREATE TABLE heartbeat_runs (
    id TEXT PRIMARY KEY,
    company_id TEXT NOT NULL REFERENCES companies (id) ON DELETE CASCADE,
    agent_id TEXT NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
    issue_id TEXT REFERENCES issues (id) ON DELETE SET NULL,
    status TEXT NOT NULL CHECK (status IN ('queued', 'running', 'succeeded', 'failed', 'cancelled', 'timed_out', 'refused')),
    wake_source TEXT NOT NULL DEFAULT '',
    wake_reason TEXT NOT NULL DEFAULT '',
    wake_comment_id TEXT,
    idempotency_key TEXT,
    payload TEXT,
    context_snapshot TEXT,
    issue_state_guard TEXT,
    refusal_reason TEXT,
    error TEXT,
    exit_code INTEGER,
    attempt INTEGER NOT NULL DEFAULT 1,
    retry_of_run_id TEXT,
    token_hash TEXT UNIQUE,
    runner_id TEXT,
    lease_expires_at TIMESTAMP,
    requested_by_kind TEXT NOT NULL DEFAULT '',
    requested_by_id TEXT NOT NULL DEFAULT '',
    created_at TIMESTAMP NOT NULL,
    started_at TIMESTAMP,
    finished_at TIMESTAMP,
    updated_at TIMESTAMP NOT NULL
);
CREATE UNIQUE INDEX heartbeat_runs_idempotency ON heartbeat_runs (agent_id, idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX heartbeat_runs_status ON heartbeat_runs (status, created_at);
CREATE INDEX heartbeat_runs_agent_status ON heartbeat_runs (agent_id, status);
CREATE INDEX heartbeat_runs_company_created ON heartbeat_runs (company_id, created_at);

CREATE TABLE heartbeat_run_logs (
    run_id TEXT PRIMARY KEY REFERENCES heartbeat_runs (id) ON DELETE CASCADE,
    content TEXT NOT NULL,
    size_bytes BIGINT NOT NULL,
    truncated BOOLEAN NOT NULL DEFAULT FALSE
);

-- +goose Down
DROP TABLE heartbeat_run_logs;
DROP TABLE heartbeat_runs;
DROP TABLE company_secret_bindings;
DROP TABLE company_secret_versions;
DROP TABLE company_secrets;
DROP TABLE action_policy_hits;
DROP TABLE action_policies;
DROP TABLE activity_log;
DROP TABLE attachments;
DROP TABLE issue_comments;
DROP TABLE issues;
DROP TABLE projects;
DROP TABLE agents;
DROP TABLE environments;
DROP TABLE board_api_keys;
DROP TABLE company_memberships;
DROP TABLE companies;
DROP TABLE users;
DROP TABLE instance_settings;
