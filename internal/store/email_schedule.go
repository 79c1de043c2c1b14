package store

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/domain"
)

// ActiveInbox is one active endpoint with the version of everything its
// active inbox check reads, for a worker that caches the check.
type ActiveInbox struct {
	domain.EmailEndpoint
	// CredentialVersion changes whenever a result of the active inbox
	// check may change: the bound runtime secret (which one, its latest
	// version, its status), the saved credential's status and update time,
	// its number of active grants and the installs that let the assigned
	// agent use it. Together with the row's updated_at (status, assigned
	// agent and credential columns) it versions the check.
	CredentialVersion string
}

// ActiveInboxes lists every active endpoint (all companies) with its
// credential version, in one statement: the bound secret at keyPath of
// targetType and the saved credential are joined, grants and installs
// counted through their indexes.
func (s *Store) ActiveInboxes(ctx context.Context, q db.Querier, targetType, keyPath string) ([]ActiveInbox, error) {
	names := strings.Split(endpointCols, ",")
	for i, n := range names {
		names[i] = "e." + strings.TrimSpace(n)
	}
	cols := strings.Join(names, ", ")
	return queryAll(ctx, q, "list active email inboxes", func(r rowScanner) (ActiveInbox, error) {
		var a ActiveInbox
		var es endpointScan
		var secretID, secretStatus, connStatus sql.NullString
		var secretVersion sql.NullInt64
		var connUpdated sql.NullTime
		var grants, installs int64
		err := r.Scan(append(es.dests(), &secretID, &secretVersion, &secretStatus, &connStatus, &connUpdated, &grants, &installs)...)
		if err != nil {
			return a, err
		}
		var cu int64
		if connUpdated.Valid {
			cu = connUpdated.Time.UnixNano()
		}
		a.EmailEndpoint = es.endpoint()
		a.CredentialVersion = fmt.Sprintf("%s/%d/%s|%s/%d|%d|%d", secretID.String, secretVersion.Int64, secretStatus.String,
			connStatus.String, cu, grants, installs)
		return a, nil
	}, `SELECT `+cols+`, ks.id, ks.latest_version, ks.status, c.status, c.updated_at,
		(SELECT COUNT(*) FROM email_connection_grants g WHERE g.connection_id = e.credential_connection_id AND g.status = 'active'),
		(SELECT COUNT(*) FROM email_connection_installs i WHERE i.connection_id = e.credential_connection_id
			AND ((i.target_type = 'company' AND i.target_id = e.company_id) OR (i.target_type = 'agent' AND i.target_id = e.assigned_agent_id)))
		FROM email_endpoints e
		LEFT JOIN company_secret_bindings b ON b.target_type = $1 AND b.target_id = e.id AND b.config_path = $2
		LEFT JOIN company_secrets ks ON ks.id = b.secret_id
		LEFT JOIN email_connections c ON c.id = e.credential_connection_id
		WHERE e.status = 'active' ORDER BY e.created_at, e.id`, targetType, keyPath)
}

// EndpointsWithWaitingDeliveries returns the ids of every endpoint (all
// companies) with a delivery waiting to be processed (received,
// processing or retry, due or not), through the (state, next_attempt_at)
// index: one statement however many inboxes exist.
func (s *Store) EndpointsWithWaitingDeliveries(ctx context.Context, q db.Querier) ([]string, error) {
	return queryAll(ctx, q, "list inboxes with waiting deliveries", func(r rowScanner) (string, error) {
		var id string
		return id, r.Scan(&id)
	}, `SELECT DISTINCT endpoint_id FROM email_deliveries WHERE state IN ('received', 'processing', 'retry')`)
}

// FinishCatchups records completed catch-up scans of several endpoints in
// one statement per 500: checkpoint is the earliest start of those scans
// (an earlier checkpoint only makes the next scan overlap more) and
// last_sync_at is now.
func (s *Store) FinishCatchups(ctx context.Context, q db.Querier, endpointIDs []string, checkpoint time.Time) error {
	for start := 0; start < len(endpointIDs); start += 500 {
		chunk := endpointIDs[start:min(start+500, len(endpointIDs))]
		args := []any{checkpoint.UTC(), s.Now()}
		ph := make([]string, len(chunk))
		for i, id := range chunk {
			args = append(args, id)
			ph[i] = fmt.Sprintf("$%d", len(args))
		}
		if _, err := q.ExecContext(ctx, `UPDATE email_endpoints SET sync_checkpoint = $1, last_sync_at = $2
			WHERE id IN (`+strings.Join(ph, ", ")+`)`, args...); err != nil {
			return fmt.Errorf("record email catch-ups: %w", err)
		}
	}
	return nil
}

// LeaseRenewal is what one batch renewal learned.
type LeaseRenewal struct {
	// Sockets are the socket lease tokens it renewed.
	Sockets map[string]bool
	// Live maps each endpoint whose socket lease another process holds
	// unexpired to that holder (nil unless asked for, and on SQLite).
	Live map[string]string
	// Replicas counts the processes with a live membership row, this one
	// included (1 on SQLite).
	Replicas int
	// Members are the holders of those live membership rows, this one
	// included, sorted (nil on SQLite): the replicas over which sockets
	// are spread by rendezvous hashing (inbound's ownership).
	Members []string
}

// RenewHolderLeases extends, in one statement, every unexpired receiving
// lease held by holder (one process: its sockets, its catch-up scans and
// the thread leases of its receiving and sending) to at least now+ttl.
// Setup and control leases (LeaseKeyWork) keep their own TTL. On
// PostgreSQL the same statement (data-modifying CTEs) also upserts the
// process's membership row in email_replicas, deletes rows dead for an
// hour, counts the live replicas and, with live, returns the endpoints
// whose socket lease another process holds, and by whom. The SELECTs see the rows as
// they were before the statement's own changes, which for other holders'
// rows is what they need (this process's own row and leases are counted
// in Go).
//
// Thread leases are extended to now+threadTTL, everything else (sockets,
// catch-up scans, the membership row) to now+ttl. every is the renewal
// period: a thread lease taken or fenced within the last half period
// (more than threadTTL-every/2 left) is left alone, and the next renewal,
// a period later, still finds it with more than threadTTL-3*every/2 left
// (1.5 s of a 3 s lease renewed every second).
func (s *Store) RenewHolderLeases(ctx context.Context, q db.Querier, holder string, ttl, threadTTL, every time.Duration, live bool) (LeaseRenewal, error) {
	now := s.Now()
	// Why the CASE: a lease with a longer TTL of its own (a send's thread
	// lease) is never shortened, only short ones are extended.
	//
	// Why fresh thread leases are skipped: on PostgreSQL the statement
	// holds every row it updates locked until it commits, and with
	// thousands of socket leases it runs for tens of milliseconds. A
	// thread lease just taken for a new email is fenced by its receiving
	// transaction a moment later; when the renewal had locked it, that
	// fence waited for the whole renewal (the tail of admission → wake
	// beside 10,000 idle inboxes, docs/benchmarks.md). A fresh lease
	// needs no renewal, and a lease being fenced is extended by its
	// fences, so it stays fresh.
	extend := `expires_at = CASE WHEN lease_key LIKE '` + leaseKeyThread + `%'
		THEN (CASE WHEN expires_at < $5 THEN $5 ELSE expires_at END)
		ELSE (CASE WHEN expires_at < $2 THEN $2 ELSE expires_at END) END`
	update := `UPDATE email_leases SET ` + extend + `, updated_at = $3
		WHERE holder = $1 AND lease_key <> '` + LeaseKeyWork + `' AND expires_at > $3
		AND (lease_key NOT LIKE '` + leaseKeyThread + `%' OR expires_at < $4) RETURNING lease_key, token, ''`
	pg := s.DB.Dialect == db.Postgres
	query := update
	args := []any{holder, now.Add(ttl), now, now.Add(threadTTL - every/2), now.Add(threadTTL)}
	if pg {
		// Why thread leases are taken SKIP LOCKED: a thread lease row is
		// locked by the fence of a transaction working under it, until that
		// commits. Waiting for it would hold every row this statement
		// already renewed, so new fences of those threads would queue
		// behind the renewal, and a transaction fencing two threads (a
		// shared receiving transaction) would deadlock with it. A locked
		// row is being renewed by that fence anyway (it extends the lease),
		// and the next renewal takes it if that transaction rolls back.
		// Socket and catch-up leases keep waiting: a skipped socket would
		// read as lost.
		update = `UPDATE email_leases SET ` + extend + `, updated_at = $3
		WHERE holder = $1 AND lease_key <> '` + LeaseKeyWork + `' AND expires_at > $3
		AND (lease_key NOT LIKE '` + leaseKeyThread + `%' OR (endpoint_id, lease_key) IN (SELECT endpoint_id, lease_key FROM email_leases
			WHERE holder = $1 AND lease_key LIKE '` + leaseKeyThread + `%' AND expires_at > $3 AND expires_at < $4 FOR UPDATE SKIP LOCKED))
		RETURNING lease_key, token`
		query = `WITH renewed AS (` + update + `),
			member AS (INSERT INTO email_replicas (holder, expires_at) VALUES ($1, $2)
				ON CONFLICT (holder) DO UPDATE SET expires_at = excluded.expires_at RETURNING holder),
			gone AS (DELETE FROM email_replicas WHERE expires_at < $6 RETURNING holder)
			SELECT lease_key, token, '' FROM renewed
			UNION ALL SELECT 'replica', holder, '' FROM email_replicas WHERE expires_at > $3 AND holder <> $1
			UNION ALL SELECT 'member', holder, '' FROM member
			UNION ALL SELECT 'gone', holder, '' FROM gone`
		args = append(args, now.Add(-time.Hour))
		if live {
			query += ` UNION ALL SELECT 'live', endpoint_id, holder FROM email_leases
				WHERE lease_key = '` + LeaseKeySocket + `' AND expires_at > $3 AND holder <> $1`
		}
	}
	type row struct{ kind, v, h string }
	rows, err := queryAll(ctx, q, "renew leases", func(r rowScanner) (row, error) {
		var x row
		return x, r.Scan(&x.kind, &x.v, &x.h)
	}, query, args...)
	if err != nil {
		return LeaseRenewal{}, err
	}
	out := LeaseRenewal{Sockets: map[string]bool{}, Replicas: 1}
	if live && pg {
		out.Live = map[string]string{}
	}
	if pg {
		out.Members = []string{holder}
	}
	for _, x := range rows {
		switch x.kind {
		case "live":
			if out.Live != nil {
				out.Live[x.v] = x.h
			}
		case "replica":
			out.Members = append(out.Members, x.v)
			out.Replicas = len(out.Members)
		case LeaseKeySocket:
			out.Sockets[x.v] = true
		default:
			// Thread and catch-up leases, membership: nothing to report.
		}
	}
	sort.Strings(out.Members)
	return out, nil
}

// ReleaseSocketToken deletes the socket lease row of token, wherever it
// is: a process that finds its batch renewal renewing a socket lease it no
// longer runs (its release failed) gives it back so another can take it.
func (s *Store) ReleaseSocketToken(ctx context.Context, q db.Querier, token string) error {
	if _, err := q.ExecContext(ctx, `DELETE FROM email_leases WHERE lease_key = $1 AND token = $2`, LeaseKeySocket, token); err != nil {
		return fmt.Errorf("release socket lease: %w", err)
	}
	return nil
}

// LiveLeaseEndpoints returns the endpoints whose key lease is held and
// unexpired, in one statement: a replica looking for sockets to take over
// needs to try only the others.
func (s *Store) LiveLeaseEndpoints(ctx context.Context, q db.Querier, key string) (map[string]bool, error) {
	ids, err := queryAll(ctx, q, "list live leases", func(r rowScanner) (string, error) {
		var id string
		return id, r.Scan(&id)
	}, `SELECT endpoint_id FROM email_leases WHERE lease_key = $1 AND expires_at > $2`, key, s.Now())
	if err != nil {
		return nil, err
	}
	out := make(map[string]bool, len(ids))
	for _, id := range ids {
		out[id] = true
	}
	return out, nil
}
