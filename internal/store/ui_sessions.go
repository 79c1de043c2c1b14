package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/paperclipai/paperclipai/internal/db"
)

// UISession is a web UI board session created from a board API key. Only
// the SHA-256 of its cookie token is stored.
type UISession struct {
	ID           string
	TokenHash    string
	UserID       string
	BoardKeyID   string
	KeyCompanyID string
	CreatedAt    time.Time
	LastSeenAt   time.Time
	ExpiresAt    time.Time
	RevokedAt    *time.Time
}

// CreateUISession inserts s (its ID is assigned here).
func (s *Store) CreateUISession(ctx context.Context, q db.Querier, u *UISession) error {
	u.ID = NewID()
	_, err := q.ExecContext(ctx, `INSERT INTO ui_sessions (id, token_hash, user_id, board_key_id, key_company_id,
		created_at, last_seen_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
		u.ID, u.TokenHash, u.UserID, u.BoardKeyID, nullString(u.KeyCompanyID), u.CreatedAt, u.LastSeenAt, u.ExpiresAt)
	if err != nil {
		return fmt.Errorf("create ui session: %w", err)
	}
	return nil
}

// LookupUISession returns the usable session whose token hashes to hash: not
// revoked, not past its absolute expiry, seen after idleSince, and whose
// board key is still active. Anything else is ErrNotFound, so callers cannot
// tell an expired session from an unknown one.
func (s *Store) LookupUISession(ctx context.Context, q db.Querier, hash string, now, idleSince time.Time) (UISession, error) {
	var u UISession
	var company sql.NullString
	err := q.QueryRowContext(ctx, `SELECT s.id, s.token_hash, s.user_id, s.board_key_id, s.key_company_id,
		s.created_at, s.last_seen_at, s.expires_at
		FROM ui_sessions s JOIN board_api_keys k ON k.id = s.board_key_id
		WHERE s.token_hash = $1 AND s.revoked_at IS NULL AND k.revoked_at IS NULL
		AND s.expires_at > $2 AND s.last_seen_at > $3`, hash, now.UTC(), idleSince.UTC()).
		Scan(&u.ID, &u.TokenHash, &u.UserID, &u.BoardKeyID, &company, &u.CreatedAt, &u.LastSeenAt, &u.ExpiresAt)
	if err != nil {
		return u, notFound("lookup ui session", err)
	}
	u.KeyCompanyID = company.String
	u.CreatedAt, u.LastSeenAt, u.ExpiresAt = u.CreatedAt.UTC(), u.LastSeenAt.UTC(), u.ExpiresAt.UTC()
	return u, nil
}

// TouchUISession records activity on a session (sliding idle timeout).
func (s *Store) TouchUISession(ctx context.Context, q db.Querier, id string, at time.Time) error {
	if _, err := q.ExecContext(ctx, `UPDATE ui_sessions SET last_seen_at = $2 WHERE id = $1`, id, at.UTC()); err != nil {
		return fmt.Errorf("touch ui session: %w", err)
	}
	return nil
}

// RevokeUISession ends a session (sign-out).
func (s *Store) RevokeUISession(ctx context.Context, q db.Querier, id string, at time.Time) error {
	if _, err := q.ExecContext(ctx, `UPDATE ui_sessions SET revoked_at = $2 WHERE id = $1 AND revoked_at IS NULL`, id, at.UTC()); err != nil {
		return fmt.Errorf("revoke ui session: %w", err)
	}
	return nil
}
