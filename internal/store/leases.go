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

// Lease keys of email_leases. One row per (endpoint, key) exists at most,
// and only its token's holder may act under it.
const (
	// LeaseKeyWork serializes setup and control operations of an inbox.
	LeaseKeyWork = "email-work"
	// LeaseKeySocket is held by the one process running an inbox's socket.
	LeaseKeySocket = "email-socket"
	// LeaseKeyCatchup is held by the process scanning an inbox.
	LeaseKeyCatchup = "email-catchup"

	leaseKeyThread = "email-thread:"
)

// ThreadLeaseKey is the lease key of one provider thread (one email
// conversation): receiving, sending and resolving a send of that thread
// all take it, so they never overlap.
func ThreadLeaseKey(threadID string) string { return leaseKeyThread + threadID }

// ErrLeaseLost means a lease expired or another holder took it.
var ErrLeaseLost = errors.New("lease lost")

// leaseReleaseTimeout bounds a release, which runs detached from the
// caller's cancellation (a stopping worker still gives its leases back).
const leaseReleaseTimeout = 5 * time.Second

// Lease is one holder's claim on (endpoint, key) in email_leases, taken
// with TryLease or TryLeases. Every transaction with a side effect under
// the lease starts with Fence, so a holder that lost its lease (paused past
// expiry, partitioned) can never commit work that a successor also does.
type Lease struct {
	st *Store
	// q runs the statements outside a transaction (Renew, Release).
	q db.Querier

	CompanyID  string
	EndpointID string
	Key        string
	// Token identifies this claim ("<holder>:<uuid>"); a later claim by the
	// same holder has another token.
	Token  string
	Holder string
	TTL    time.Duration
}

// newToken returns a fresh lease token of holder.
func newToken(holder string) string { return holder + ":" + NewID() }

// TryLease takes the (endpoint, key) lease for holder if it is free or
// expired. When another holder has it, l is nil and until is when that
// holder's lease lapses (zero when unknown). Statements outside a
// transaction later run on q.
func (s *Store) TryLease(ctx context.Context, q db.Querier, companyID, endpointID, key, holder string, ttl time.Duration) (l *Lease, until time.Time, err error) {
	l = &Lease{st: s, q: q, CompanyID: companyID, EndpointID: endpointID, Key: key, Token: newToken(holder), Holder: holder, TTL: ttl}
	ok, err := s.acquireLease(ctx, q, l)
	if err != nil {
		s.releaseLater(endpointID, l.Token, ttl) // the claim may have committed
		return nil, time.Time{}, err
	}
	if ok {
		return l, time.Time{}, nil
	}
	exp, err := s.leaseExpiry(ctx, q, endpointID, key)
	if err != nil || exp == nil {
		return nil, time.Time{}, err
	}
	return nil, *exp, nil
}

// Renew extends the lease by its TTL outside any transaction and reports
// whether it was still held (a keep-alive for long-lived holders).
func (l *Lease) Renew(ctx context.Context) (bool, error) {
	return l.st.renewLease(ctx, l.q, l)
}

// Fence proves, inside tx, that the lease is still held, and extends it by
// its TTL: one statement both checks ownership and keeps it. A lost lease is
// ErrLeaseLost.
func (l *Lease) Fence(ctx context.Context, tx *sql.Tx) error {
	ok, err := l.st.renewLease(ctx, tx, l)
	if err != nil {
		return err
	}
	if !ok {
		return ErrLeaseLost
	}
	return nil
}

// FenceLocked takes the transaction advisory lock lockKey and then fences,
// in one round trip on PostgreSQL: the lock is an uncorrelated sub-select,
// which PostgreSQL evaluates once as a one-time filter before scanning the
// lease row, so the two locks are taken in the same order as with two
// statements (advisory lock first). On SQLite, where the advisory lock is
// a no-op, it is Fence.
func (l *Lease) FenceLocked(ctx context.Context, tx *sql.Tx, lockKey string) error {
	if l.st.DB.Dialect != db.Postgres {
		return l.Fence(ctx, tx)
	}
	now := l.st.Now()
	res, err := tx.ExecContext(ctx, `UPDATE email_leases SET expires_at = $4, updated_at = $5
		WHERE endpoint_id = $1 AND lease_key = $2 AND token = $3 AND expires_at > $5
		AND (SELECT COUNT(*) FROM (SELECT pg_advisory_xact_lock(hashtextextended($6, 0))) adv) = 1`,
		l.EndpointID, l.Key, l.Token, now.Add(l.TTL), now, lockKey)
	if err != nil {
		return fmt.Errorf("renew lease %s: %w", l.Key, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return ErrLeaseLost
	}
	return nil
}

// Release gives the lease back if it is still held, bounded in time and
// detached from ctx's cancellation.
func (l *Lease) Release(ctx context.Context) error {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), leaseReleaseTimeout)
	defer cancel()
	if _, err := l.q.ExecContext(rctx, `DELETE FROM email_leases WHERE endpoint_id = $1 AND lease_key = $2 AND token = $3`,
		l.EndpointID, l.Key, l.Token); err != nil {
		l.st.releaseLater(l.EndpointID, l.Token, l.TTL)
		return fmt.Errorf("release lease %s: %w", l.Key, err)
	}
	return nil
}

// releaseRetry is the pause between background release attempts.
const releaseRetry = 250 * time.Millisecond

// releaseLater deletes token's rows in the background, retrying until it
// succeeds or ttl has passed (the rows have expired by then anyway). It
// serves a claim whose outcome is unknown (the acquiring statement failed,
// yet may have committed: the connection dropped before the answer) and a
// release that failed (the database was unreachable). Why: such a row
// blocks its key for every holder, this process included, until it
// expires, 90 s by default after the database is back; deleting it as
// soon as the database answers lets the work go on within a second.
// Deleting by token is always safe: a row another holder took since has
// another token. It runs on the pool, never on the caller's transaction.
func (s *Store) releaseLater(endpointID, token string, ttl time.Duration) {
	until := s.Now().Add(ttl)
	go func() {
		for s.Now().Before(until) {
			time.Sleep(releaseRetry)
			ctx, cancel := context.WithTimeout(context.Background(), leaseReleaseTimeout)
			_, err := s.DB.ExecContext(ctx, `DELETE FROM email_leases WHERE endpoint_id = $1 AND token = $2`, endpointID, token)
			cancel()
			// A closed database (the process is stopping) will not answer
			// again; its rows expire on their own.
			if err == nil || strings.Contains(err.Error(), "sql: database is closed") {
				return
			}
		}
	}()
}

// LeaseSet is the leases of one endpoint taken together under one token by
// TryLeases: one statement to take them, one to release them.
type LeaseSet struct {
	st         *Store
	q          db.Querier
	EndpointID string
	Token      string
	held       map[string]*Lease
}

// TryLeases takes, under one token, every lease of keys on the endpoint
// that is free or expired, in one statement per 100 keys. Keys are taken in
// sorted order, so two callers with overlapping sets cannot deadlock on
// each other's rows.
func (s *Store) TryLeases(ctx context.Context, q db.Querier, companyID, endpointID string, keys []string, holder string, ttl time.Duration) (*LeaseSet, error) {
	set := &LeaseSet{st: s, q: q, EndpointID: endpointID, Token: newToken(holder), held: map[string]*Lease{}}
	sorted := append([]string(nil), keys...)
	slices.Sort(sorted)
	sorted = slices.Compact(sorted)
	now := s.Now()
	for start := 0; start < len(sorted); start += 100 {
		chunk := sorted[start:min(start+100, len(sorted))]
		args := []any{endpointID, companyID, set.Token, holder, now.Add(ttl), now}
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
			s.releaseLater(endpointID, set.Token, ttl) // earlier chunks, or this one, may have committed
			return nil, err
		}
		for _, k := range held {
			set.held[k] = &Lease{st: s, q: q, CompanyID: companyID, EndpointID: endpointID, Key: k, Token: set.Token, Holder: holder, TTL: ttl}
		}
	}
	return set, nil
}

// Get returns the held lease of key, or nil when another holder has it.
func (set *LeaseSet) Get(key string) *Lease { return set.held[key] }

// Len is the number of leases held.
func (set *LeaseSet) Len() int { return len(set.held) }

// Release gives back every lease of the set still held, bounded in time and
// detached from ctx's cancellation.
func (set *LeaseSet) Release(ctx context.Context) error {
	if len(set.held) == 0 {
		return nil
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), leaseReleaseTimeout)
	defer cancel()
	if _, err := set.q.ExecContext(rctx, `DELETE FROM email_leases WHERE endpoint_id = $1 AND token = $2`, set.EndpointID, set.Token); err != nil {
		var ttl time.Duration
		for _, l := range set.held {
			ttl = l.TTL
			break
		}
		set.st.releaseLater(set.EndpointID, set.Token, ttl)
		return fmt.Errorf("release leases: %w", err)
	}
	return nil
}

// acquireLease takes l's row when it is free, expired or already l's, in
// one statement, so two replicas can never both hold it.
func (s *Store) acquireLease(ctx context.Context, q db.Querier, l *Lease) (bool, error) {
	now := s.Now()
	res, err := q.ExecContext(ctx, `INSERT INTO email_leases (endpoint_id, lease_key, company_id, token, holder, expires_at, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $7)
		ON CONFLICT (endpoint_id, lease_key) DO UPDATE SET token = excluded.token, holder = excluded.holder,
			expires_at = excluded.expires_at, updated_at = excluded.updated_at
		WHERE email_leases.token = excluded.token OR email_leases.expires_at <= $7`,
		l.EndpointID, l.Key, l.CompanyID, l.Token, l.Holder, now.Add(l.TTL), now)
	if err != nil {
		return false, fmt.Errorf("acquire lease %s: %w", l.Key, err)
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

// renewLease extends l's unexpired row to now+TTL and reports whether l
// still held it.
func (s *Store) renewLease(ctx context.Context, q db.Querier, l *Lease) (bool, error) {
	now := s.Now()
	res, err := q.ExecContext(ctx, `UPDATE email_leases SET expires_at = $4, updated_at = $5
		WHERE endpoint_id = $1 AND lease_key = $2 AND token = $3 AND expires_at > $5`,
		l.EndpointID, l.Key, l.Token, now.Add(l.TTL), now)
	if err != nil {
		return false, fmt.Errorf("renew lease %s: %w", l.Key, err)
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

// leaseExpiry returns when the (endpoint, key) lease expires, or nil when
// no lease row exists.
func (s *Store) leaseExpiry(ctx context.Context, q db.Querier, endpointID, key string) (*time.Time, error) {
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
	if _, err := q.ExecContext(ctx, `DELETE FROM email_leases WHERE lease_key IN ($1, $2) OR lease_key LIKE $3`,
		LeaseKeySocket, LeaseKeyCatchup, leaseKeyThread+"%"); err != nil {
		return fmt.Errorf("clear stale email leases: %w", err)
	}
	return nil
}

// ThreadLeaseHeld reports whether any unexpired thread lease exists on the
// endpoint (an email operation is running).
func (s *Store) ThreadLeaseHeld(ctx context.Context, q db.Querier, endpointID string) (bool, error) {
	var n int
	err := q.QueryRowContext(ctx, `SELECT COUNT(*) FROM email_leases WHERE endpoint_id = $1 AND lease_key LIKE $2 AND expires_at > $3`,
		endpointID, leaseKeyThread+"%", s.Now()).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("check thread leases: %w", err)
	}
	return n > 0, nil
}
