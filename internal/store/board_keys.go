package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/domain"
)

// CreateBoardKey stores a new board API key for userID (scoped to companyID
// when not empty) and returns it with its one-time plaintext token.
func (s *Store) CreateBoardKey(ctx context.Context, q db.Querier, userID, companyID, name string) (domain.BoardAPIKey, string, error) {
	token := RandomToken("pcb_")
	k := domain.BoardAPIKey{ID: NewID(), UserID: userID, CompanyID: companyID, Name: name, CreatedAt: s.Now()}
	_, err := q.ExecContext(ctx, `INSERT INTO board_api_keys (id, user_id, company_id, name, token_hash, created_at)
		VALUES ($1, $2, $3, $4, $5, $6)`, k.ID, userID, nullString(companyID), name, HashToken(token), k.CreatedAt)
	if err != nil {
		return k, "", fmt.Errorf("create board key: %w", err)
	}
	return k, token, nil
}

// LookupBoardKey returns the active board key whose token hashes to hash.
func (s *Store) LookupBoardKey(ctx context.Context, q db.Querier, hash string) (domain.BoardAPIKey, error) {
	return queryOne(ctx, q, "lookup board key", scanBoardKey, `SELECT `+boardKeyCols+` FROM board_api_keys
		WHERE token_hash = $1 AND revoked_at IS NULL`, hash)
}

// boardKeyUseGranularity is how stale a key's last_used_at may get before
// a use writes it again.
const boardKeyUseGranularity = time.Minute

// NoteBoardKeyUsed records that k (as LookupBoardKey returned it) just
// authenticated. Why at most once a minute per key: every API request of
// a script authenticates, and a write per request would turn each read
// into a write (and, on SQLite, queue it behind the single writer); the
// dates shown are "last used" to the minute. The WHERE clause keeps
// concurrent requests of one key from all writing it.
func (s *Store) NoteBoardKeyUsed(ctx context.Context, q db.Querier, k domain.BoardAPIKey) error {
	now := s.Now()
	if k.LastUsedAt != nil && now.Sub(*k.LastUsedAt) < boardKeyUseGranularity {
		return nil
	}
	if _, err := q.ExecContext(ctx, `UPDATE board_api_keys SET last_used_at = $2
		WHERE id = $1 AND (last_used_at IS NULL OR last_used_at < $3)`, k.ID, now, now.Add(-boardKeyUseGranularity)); err != nil {
		return fmt.Errorf("note board key use: %w", err)
	}
	return nil
}

const boardKeyCols = `id, user_id, company_id, name, created_at, last_used_at, revoked_at`

func scanBoardKey(row rowScanner) (domain.BoardAPIKey, error) {
	var k domain.BoardAPIKey
	var company sql.NullString
	var used, revoked sql.NullTime
	err := row.Scan(&k.ID, &k.UserID, &company, &k.Name, &k.CreatedAt, &used, &revoked)
	k.CompanyID, k.CreatedAt = company.String, k.CreatedAt.UTC()
	if used.Valid {
		t := used.Time.UTC()
		k.LastUsedAt = &t
	}
	if revoked.Valid {
		t := revoked.Time.UTC()
		k.RevokedAt = &t
	}
	return k, err
}

// GetBoardKey returns a board key (revoked or not) by id.
func (s *Store) GetBoardKey(ctx context.Context, q db.Querier, id string) (domain.BoardAPIKey, error) {
	return queryOne(ctx, q, "get board key", scanBoardKey, `SELECT `+boardKeyCols+` FROM board_api_keys WHERE id = $1`, id)
}

// BoardKeyFilter selects active board keys; empty fields match all.
type BoardKeyFilter struct {
	CompanyID string
	UserID    string
}

// ListBoardKeys returns a page of active (unrevoked) board keys, newest
// first.
func (s *Store) ListBoardKeys(ctx context.Context, q db.Querier, f BoardKeyFilter, p Page) ([]domain.BoardAPIKey, error) {
	where := `revoked_at IS NULL`
	args := []any{}
	if f.CompanyID != "" {
		args = append(args, f.CompanyID)
		where += fmt.Sprintf(" AND company_id = $%d", len(args))
	}
	if f.UserID != "" {
		args = append(args, f.UserID)
		where += fmt.Sprintf(" AND user_id = $%d", len(args))
	}
	return listPage(ctx, q, "list board keys", scanBoardKey, `SELECT `+boardKeyCols+` FROM board_api_keys`, where, args,
		"created_at", "id", p)
}

// RevokeBoardKey revokes a key; revoking a revoked key changes nothing.
// Authentication reads the key row on every request, so the key stops
// working with the commit.
func (s *Store) RevokeBoardKey(ctx context.Context, q db.Querier, id string) error {
	if _, err := q.ExecContext(ctx, `UPDATE board_api_keys SET revoked_at = $2 WHERE id = $1 AND revoked_at IS NULL`, id, s.Now()); err != nil {
		return fmt.Errorf("revoke board key: %w", err)
	}
	return nil
}
