package store

import (
	"context"
	"fmt"

	"github.com/paperclipai/paperclipai/internal/db"
)

// KeyCheck is the instance's master key check value: a known plaintext
// sealed with the master key, and that key's fingerprint.
type KeyCheck struct {
	KeyID  string
	Sealed string
}

// GetKeyCheck returns the instance's master key check value (ErrNotFound
// before the first server start).
func (s *Store) GetKeyCheck(ctx context.Context, q db.Querier) (KeyCheck, error) {
	var k KeyCheck
	err := q.QueryRowContext(ctx, `SELECT key_id, sealed FROM instance_key_check WHERE id = 1`).Scan(&k.KeyID, &k.Sealed)
	if err != nil {
		return k, notFound("read master key check", err)
	}
	return k, nil
}

// InsertKeyCheck stores the check value unless one exists already and
// reports whether this call stored it. Replicas starting together race
// here; ON CONFLICT makes exactly one of them the creator, and the others
// then verify their key against the winner's value.
func (s *Store) InsertKeyCheck(ctx context.Context, q db.Querier, k KeyCheck) (bool, error) {
	res, err := q.ExecContext(ctx, `INSERT INTO instance_key_check (id, key_id, sealed, created_at) VALUES (1, $1, $2, $3)
		ON CONFLICT (id) DO NOTHING`, k.KeyID, k.Sealed, s.Now())
	if err != nil {
		return false, fmt.Errorf("store master key check: %w", err)
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

// AnySecretVersion returns one stored secret version (its secret id and
// version), the newest, or ErrNotFound when the database holds none. A
// database created before the key check existed is verified against it.
func (s *Store) AnySecretVersion(ctx context.Context, q db.Querier) (string, int, error) {
	var id string
	var v int
	err := q.QueryRowContext(ctx, `SELECT sv.secret_id, sv.version FROM company_secret_versions sv
		JOIN company_secrets s ON s.id = sv.secret_id WHERE s.status = 'active'
		ORDER BY sv.created_at DESC, sv.secret_id LIMIT 1`).Scan(&id, &v)
	if err != nil {
		return "", 0, notFound("read a secret version", err)
	}
	return id, v, nil
}
