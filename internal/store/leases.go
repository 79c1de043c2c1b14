package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/paperclipai/paperclipai/internal/db"
)

// RenewLease extends token's unexpired (endpoint, key) lease to now+ttl and
// reports whether token still held it. It is the worker's fence: one
// statement both proves ownership and keeps it, so work done after a true
// result cannot overlap a successor's.
func (s *Store) RenewLease(ctx context.Context, q db.Querier, endpointID, key, token string, ttl time.Duration) (bool, error) {
	now := s.Now()
	res, err := q.ExecContext(ctx, `UPDATE email_leases SET expires_at = $4, updated_at = $5
		WHERE endpoint_id = $1 AND lease_key = $2 AND token = $3 AND expires_at > $5`,
		endpointID, key, token, now.Add(ttl), now)
	if err != nil {
		return false, fmt.Errorf("renew lease %s: %w", key, err)
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

// AcquireLeases takes, for token, every lease of keys on the endpoint that
// is free, expired or already token's (the rule of AcquireLease), in one
// statement per 100 keys, and returns the keys it holds. Keys are taken in
// sorted order, so two callers with overlapping sets cannot deadlock on
// each other's rows.
func (s *Store) AcquireLeases(ctx context.Context, q db.Querier, companyID, endpointID string, keys []string, token, holder string, ttl time.Duration) (map[string]bool, error) {
	sorted := append([]string(nil), keys...)
	slices.Sort(sorted)
	sorted = slices.Compact(sorted)
	out := map[string]bool{}
	now := s.Now()
	for start := 0; start < len(sorted); start += 100 {
		chunk := sorted[start:min(start+100, len(sorted))]
		args := []any{endpointID, companyID, token, holder, now.Add(ttl), now}
		rows := make([]string, len(chunk))
		for i, k := range chunk {
			args = append(args, k)
			rows[i] = fmt.Sprintf("($1, $%d, $2, $3, $4, $5, $6, $6)", len(args))
		}
		held, err := queryAll(ctx, q, "acquire leases", func(r rowScanner) (string, error) {
			var k string
			return k, r.Scan(&k)
		}, `INSERT INTO email_leases (endpoint_id, lease_key, company_id, token, holder, expires_at, created_at, updated_at)
			VALUES `+strings.Join(rows, ", ")+`
			ON CONFLICT (endpoint_id, lease_key) DO UPDATE SET token = excluded.token, holder = excluded.holder,
				expires_at = excluded.expires_at, updated_at = excluded.updated_at
			WHERE email_leases.token = excluded.token OR email_leases.expires_at <= $6
			RETURNING lease_key`, args...)
		if err != nil {
			return nil, err
		}
		for _, k := range held {
			out[k] = true
		}
	}
	return out, nil
}

// ReleaseLeasesOf deletes every lease of the endpoint that token holds.
func (s *Store) ReleaseLeasesOf(ctx context.Context, q db.Querier, endpointID, token string) error {
	if _, err := q.ExecContext(ctx, `DELETE FROM email_leases WHERE endpoint_id = $1 AND token = $2`, endpointID, token); err != nil {
		return fmt.Errorf("release leases: %w", err)
	}
	return nil
}

// RenewLeaseLocked is AdvisoryXactLock(lockKey) followed by RenewLease, in
// one round trip on PostgreSQL: the lock is an uncorrelated sub-select,
// which PostgreSQL evaluates once as a one-time filter before scanning the
// lease row, so the order of the two locks is the same as with two
// statements (advisory lock first). On SQLite, where the advisory lock is
// a no-op, it is RenewLease.
func (s *Store) RenewLeaseLocked(ctx context.Context, tx *sql.Tx, endpointID, key, token string, ttl time.Duration, lockKey string) (bool, error) {
	if s.DB.Dialect != db.Postgres {
		return s.RenewLease(ctx, tx, endpointID, key, token, ttl)
	}
	now := s.Now()
	res, err := tx.ExecContext(ctx, `UPDATE email_leases SET expires_at = $4, updated_at = $5
		WHERE endpoint_id = $1 AND lease_key = $2 AND token = $3 AND expires_at > $5
		AND (SELECT COUNT(*) FROM (SELECT pg_advisory_xact_lock(hashtextextended($6, 0))) adv) = 1`,
		endpointID, key, token, now.Add(ttl), now, lockKey)
	if err != nil {
		return false, fmt.Errorf("renew lease %s: %w", key, err)
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

// LeaseExpiry returns when the (endpoint, key) lease expires, or nil when
// no lease row exists.
func (s *Store) LeaseExpiry(ctx context.Context, q db.Querier, endpointID, key string) (*time.Time, error) {
	var t sql.NullTime
	err := q.QueryRowContext(ctx, `SELECT expires_at FROM email_leases WHERE endpoint_id = $1 AND lease_key = $2`, endpointID, key).Scan(&t)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read lease %s: %w", key, err)
	}
	return timePtr(t), nil
}

// DeleteReceivingLeases removes every socket, catch-up and thread lease. It
// is only safe when no other process can use the database (SQLite under the
// home lock): at start, such leases can only belong to a dead predecessor.
func (s *Store) DeleteReceivingLeases(ctx context.Context, q db.Querier) error {
	if _, err := q.ExecContext(ctx, `DELETE FROM email_leases WHERE lease_key IN ('email-socket', 'email-catchup')
		OR lease_key LIKE 'email-thread:%'`); err != nil {
		return fmt.Errorf("clear stale email leases: %w", err)
	}
	return nil
}

// AcquireLease takes or renews the (endpoint, key) lease for token until
// expiresAt. It succeeds when the lease is free, expired or already held by
// token, in one statement, so two replicas can never both hold it.
func (s *Store) AcquireLease(ctx context.Context, q db.Querier, companyID, endpointID, key, token, holder string, ttl time.Duration) (bool, error) {
	now := s.Now()
	res, err := q.ExecContext(ctx, `INSERT INTO email_leases (endpoint_id, lease_key, company_id, token, holder, expires_at, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $7)
		ON CONFLICT (endpoint_id, lease_key) DO UPDATE SET token = excluded.token, holder = excluded.holder,
			expires_at = excluded.expires_at, updated_at = excluded.updated_at
		WHERE email_leases.token = excluded.token OR email_leases.expires_at <= $7`,
		endpointID, key, companyID, token, holder, now.Add(ttl), now)
	if err != nil {
		return false, fmt.Errorf("acquire lease %s: %w", key, err)
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

// LeaseHeld reports whether token still holds an unexpired (endpoint, key)
// lease: the fence checked right before a provider side effect.
func (s *Store) LeaseHeld(ctx context.Context, q db.Querier, endpointID, key, token string) (bool, error) {
	var n int
	err := q.QueryRowContext(ctx, `SELECT COUNT(*) FROM email_leases WHERE endpoint_id = $1 AND lease_key = $2 AND token = $3 AND expires_at > $4`,
		endpointID, key, token, s.Now()).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("check lease %s: %w", key, err)
	}
	return n == 1, nil
}

// ReleaseLease drops the lease if token holds it.
func (s *Store) ReleaseLease(ctx context.Context, q db.Querier, endpointID, key, token string) error {
	if _, err := q.ExecContext(ctx, `DELETE FROM email_leases WHERE endpoint_id = $1 AND lease_key = $2 AND token = $3`,
		endpointID, key, token); err != nil {
		return fmt.Errorf("release lease %s: %w", key, err)
	}
	return nil
}

// ThreadLeaseHeld reports whether any unexpired per-thread lease exists on
// the endpoint (an email operation is running).
func (s *Store) ThreadLeaseHeld(ctx context.Context, q db.Querier, endpointID string) (bool, error) {
	var n int
	err := q.QueryRowContext(ctx, `SELECT COUNT(*) FROM email_leases WHERE endpoint_id = $1 AND lease_key LIKE 'email-thread:%' AND expires_at > $2`,
		endpointID, s.Now()).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("check thread leases: %w", err)
	}
	return n > 0, nil
}
