-- Board sessions of the web UI in authenticated mode: a signed-in browser
-- holds a random cookie token whose SHA-256 is stored here; the session is
-- bound to the board key it was created from, so revoking the key ends it.

-- +goose Up
CREATE TABLE ui_sessions (
    id TEXT PRIMARY KEY,
    token_hash TEXT NOT NULL UNIQUE,
    user_id TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    board_key_id TEXT NOT NULL REFERENCES board_api_keys (id) ON DELETE CASCADE,
    key_company_id TEXT,
    created_at TIMESTAMP NOT NULL,
    last_seen_at TIMESTAMP NOT NULL,
    expires_at TIMESTAMP NOT NULL,
    revoked_at TIMESTAMP
);
CREATE INDEX ui_sessions_user ON ui_sessions (user_id);

-- +goose Down
DROP TABLE ui_sessions;
