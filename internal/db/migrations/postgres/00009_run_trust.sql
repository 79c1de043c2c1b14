-- Trust boundary of agent runs. host_execution_approved records that an
-- instance administrator wrote the agent's host-executing adapter
-- configuration (command, args, env, cwd; a non-public http URL); without
-- it a process agent runs only in an active sandbox environment. Existing
-- agents start unapproved: nobody can tell who configured them.
-- cancel_requested_at/cancel_reason mark a running run whose cancellation
-- was asked for (pause, terminate, POST /heartbeat-runs/:id/cancel); the
-- replica executing it stops the process, and its token is already gone.

-- +goose Up
ALTER TABLE agents ADD COLUMN host_execution_approved BOOLEAN NOT NULL DEFAULT FALSE;
ALTER TABLE heartbeat_runs ADD COLUMN cancel_requested_at TIMESTAMPTZ;
ALTER TABLE heartbeat_runs ADD COLUMN cancel_reason TEXT;

-- +goose Down
ALTER TABLE heartbeat_runs DROP COLUMN cancel_reason;
ALTER TABLE heartbeat_runs DROP COLUMN cancel_requested_at;
ALTER TABLE agents DROP COLUMN host_execution_approved;
