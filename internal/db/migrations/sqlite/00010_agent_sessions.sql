-- CLI agents (claude_local, codex_local): the conversation a task's runs
-- resume, what each run consumed, the sub-cent remainder of an agent's
-- monthly spend, and whether a sandbox environment may reach the model
-- provider's API (through the run's egress proxy; off by default).

-- +goose Up
-- SQLite cannot alter a CHECK constraint. Widening one does not change
-- any stored row, which is the case SQLite's documentation allows to be
-- edited in the schema text directly (writable_schema); the CREATE TABLE
-- below then bumps the schema version, so every connection reloads it.
-- Editing only the constraint's text keeps any column other migrations add.
PRAGMA writable_schema = ON;
UPDATE sqlite_schema SET sql = replace(sql, 'CHECK (adapter_type IN (''process'', ''http''))',
    'CHECK (adapter_type IN (''process'', ''http'', ''claude_local'', ''codex_local''))')
    WHERE type = 'table' AND name = 'agents';
PRAGMA writable_schema = RESET;
CREATE TABLE agent_task_sessions (
    agent_id TEXT NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
    issue_id TEXT NOT NULL REFERENCES issues (id) ON DELETE CASCADE,
    adapter_type TEXT NOT NULL,
    session_id TEXT NOT NULL,
    workdir TEXT NOT NULL,
    run_id TEXT,
    updated_at TIMESTAMP NOT NULL,
    PRIMARY KEY (agent_id, issue_id)
);
ALTER TABLE heartbeat_runs ADD COLUMN session_id TEXT;
ALTER TABLE heartbeat_runs ADD COLUMN input_tokens BIGINT;
ALTER TABLE heartbeat_runs ADD COLUMN cached_input_tokens BIGINT;
ALTER TABLE heartbeat_runs ADD COLUMN cache_creation_tokens BIGINT;
ALTER TABLE heartbeat_runs ADD COLUMN output_tokens BIGINT;
ALTER TABLE heartbeat_runs ADD COLUMN cost_micros BIGINT;
ALTER TABLE agents ADD COLUMN spend_remainder_micros BIGINT NOT NULL DEFAULT 0;
ALTER TABLE environments ADD COLUMN allow_network BOOLEAN NOT NULL DEFAULT FALSE;

-- +goose Down
PRAGMA writable_schema = ON;
UPDATE sqlite_schema SET sql = replace(sql, 'CHECK (adapter_type IN (''process'', ''http'', ''claude_local'', ''codex_local''))',
    'CHECK (adapter_type IN (''process'', ''http''))')
    WHERE type = 'table' AND name = 'agents';
PRAGMA writable_schema = RESET;
ALTER TABLE environments DROP COLUMN allow_network;
ALTER TABLE agents DROP COLUMN spend_remainder_micros;
ALTER TABLE heartbeat_runs DROP COLUMN cost_micros;
ALTER TABLE heartbeat_runs DROP COLUMN output_tokens;
ALTER TABLE heartbeat_runs DROP COLUMN cache_creation_tokens;
ALTER TABLE heartbeat_runs DROP COLUMN cached_input_tokens;
ALTER TABLE heartbeat_runs DROP COLUMN input_tokens;
ALTER TABLE heartbeat_runs DROP COLUMN session_id;
DROP TABLE agent_task_sessions;
