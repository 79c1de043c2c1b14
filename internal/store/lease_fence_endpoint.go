package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/domain"
)

// FenceLockedEndpoint is FenceLocked followed by EndpointShared of the
// lease's endpoint: the thread's advisory lock, the fence, and the inbox
// row under a shared lock, in one round trip on PostgreSQL. A lost lease
// is ErrLeaseLost, a missing inbox ErrNotFound.
//
// Why one statement keeps the order of the two: the uncorrelated EXISTS
// on the data-modifying CTE is a one-time filter, evaluated before the
// inbox row is scanned and locked, so the advisory lock and the lease row
// are taken first, as with separate statements. When no row comes back
// (a lost lease or a missing inbox, both rare), the two are told apart
// with the separate statements; fencing again inside the transaction is
// harmless (it only extends the lease we hold).
func (l *Lease) FenceLockedEndpoint(ctx context.Context, tx *sql.Tx, lockKey string) (domain.EmailEndpoint, error) {
	s := l.st
	if s.DB.Dialect != db.Postgres {
		if err := l.Fence(ctx, tx); err != nil {
			return domain.EmailEndpoint{}, err
		}
		return s.EndpointShared(ctx, tx, l.EndpointID)
	}
	now := s.Now()
	ep, err := scanEndpoint(tx.QueryRowContext(ctx, `WITH f AS (UPDATE email_leases SET expires_at = $4, updated_at = $5
		WHERE endpoint_id = $1 AND lease_key = $2 AND token = $3 AND expires_at > $5
		AND (SELECT COUNT(*) FROM (SELECT pg_advisory_xact_lock(hashtextextended($6, 0))) adv) = 1 RETURNING 1)
		SELECT `+endpointCols+` FROM email_endpoints WHERE id = $1 AND EXISTS (SELECT 1 FROM f) FOR SHARE`,
		l.EndpointID, l.Key, l.Token, now.Add(l.TTL), now, lockKey))
	if err == nil {
		return ep, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return ep, fmt.Errorf("renew lease %s: %w", l.Key, err)
	}
	if err := l.Fence(ctx, tx); err != nil {
		return domain.EmailEndpoint{}, err
	}
	return s.EndpointShared(ctx, tx, l.EndpointID)
}

// FenceLockedEndpointDelivery is FenceLockedEndpoint followed by
// GetDelivery of deliveryID with its row lock: the receiving
// transaction's whole prologue in one round trip on PostgreSQL. Errors are
// FenceLockedEndpoint's, and ErrNotFound for a missing delivery.
func (l *Lease) FenceLockedEndpointDelivery(ctx context.Context, tx *sql.Tx, lockKey, deliveryID string) (domain.EmailEndpoint, EmailDelivery, error) {
	ep, ds, err := l.FenceLockedEndpointDeliveries(ctx, tx, lockKey, []string{deliveryID})
	if err != nil {
		return ep, EmailDelivery{}, err
	}
	return ep, ds[0], nil
}

// FenceLockedEndpointDeliveries is FenceLockedEndpoint followed by
// GetDelivery of each of ids with its row lock, in one round trip on
// PostgreSQL: the prologue of one thread's part of a shared receiving
// transaction. The deliveries come back in the order of ids. Errors are
// FenceLockedEndpoint's, and ErrNotFound when any delivery is missing.
//
// Why the order holds: e is referenced twice, so it is materialized, and
// dl's uncorrelated EXISTS on it is a one-time filter, so the advisory
// lock, the lease row and the inbox row are all taken before the delivery
// rows are locked (in id order), as with separate statements. A row lock
// waited for reads the row's latest version, so the deliveries are current
// even if the advisory lock had to wait. When rows are missing, the
// separate statements tell the cases apart.
func (l *Lease) FenceLockedEndpointDeliveries(ctx context.Context, tx *sql.Tx, lockKey string, ids []string) (domain.EmailEndpoint, []EmailDelivery, error) {
	s := l.st
	if s.DB.Dialect == db.Postgres {
		ep, byID, err := l.fenceLockedDeliveriesPostgres(ctx, tx, lockKey, ids)
		if err != nil {
			return ep, nil, err
		}
		if out, ok := inOrder(byID, ids); ok {
			return ep, out, nil
		}
	}
	ep, err := l.FenceLockedEndpoint(ctx, tx, lockKey)
	if err != nil {
		return ep, nil, err
	}
	out := make([]EmailDelivery, len(ids))
	for i, id := range ids {
		if out[i], err = s.GetDelivery(ctx, tx, id, true); err != nil {
			return ep, nil, err
		}
	}
	return ep, out, nil
}

// fenceLockedDeliveriesPostgres runs FenceLockedEndpointDeliveries' one
// statement and returns the deliveries it locked by id (none when the
// fence or the inbox failed).
func (l *Lease) fenceLockedDeliveriesPostgres(ctx context.Context, tx *sql.Tx, lockKey string, ids []string) (domain.EmailEndpoint, map[string]EmailDelivery, error) {
	now := l.st.Now()
	rows, err := tx.QueryContext(ctx, `WITH f AS (UPDATE email_leases SET expires_at = $4, updated_at = $5
		WHERE endpoint_id = $1 AND lease_key = $2 AND token = $3 AND expires_at > $5
		AND (SELECT COUNT(*) FROM (SELECT pg_advisory_xact_lock(hashtextextended($6, 0))) adv) = 1 RETURNING 1),
		e AS (SELECT `+endpointCols+` FROM email_endpoints WHERE id = $1 AND EXISTS (SELECT 1 FROM f) FOR SHARE),
		dl AS (SELECT `+deliveryCols+` FROM email_deliveries WHERE id = ANY($7::text[]) AND EXISTS (SELECT 1 FROM e) ORDER BY id FOR UPDATE)
		SELECT e.*, dl.* FROM e, dl`,
		l.EndpointID, l.Key, l.Token, now.Add(l.TTL), now, lockKey, ids)
	if err != nil {
		return domain.EmailEndpoint{}, nil, fmt.Errorf("renew lease %s: %w", l.Key, err)
	}
	defer rows.Close()
	var ep domain.EmailEndpoint
	byID := make(map[string]EmailDelivery, len(ids))
	for rows.Next() {
		var es endpointScan
		var ds deliveryScan
		if err := rows.Scan(append(es.dests(), ds.dests()...)...); err != nil {
			return ep, nil, fmt.Errorf("renew lease %s: %w", l.Key, err)
		}
		ep = es.endpoint()
		d := ds.delivery()
		byID[d.ID] = d
	}
	if err := rows.Err(); err != nil {
		return ep, nil, fmt.Errorf("renew lease %s: %w", l.Key, err)
	}
	return ep, byID, nil
}

// inOrder returns the deliveries of byID in the order of ids, and false
// when any is missing.
func inOrder(byID map[string]EmailDelivery, ids []string) ([]EmailDelivery, bool) {
	out := make([]EmailDelivery, len(ids))
	for i, id := range ids {
		d, ok := byID[id]
		if !ok {
			return nil, false
		}
		out[i] = d
	}
	return out, true
}
