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
//
// Why the order holds: e is referenced twice, so it is materialized, and
// dl's uncorrelated EXISTS on it is a one-time filter, so the advisory
// lock, the lease row and the inbox row are all taken before the delivery
// row is locked, as with separate statements. A row lock waited for reads
// the row's latest version, so the delivery is current even if the
// advisory lock had to wait. When no row comes back, the separate
// statements tell the cases apart.
func (l *Lease) FenceLockedEndpointDelivery(ctx context.Context, tx *sql.Tx, lockKey, deliveryID string) (domain.EmailEndpoint, EmailDelivery, error) {
	s := l.st
	if s.DB.Dialect == db.Postgres {
		now := s.Now()
		var es endpointScan
		var ds deliveryScan
		err := tx.QueryRowContext(ctx, `WITH f AS (UPDATE email_leases SET expires_at = $4, updated_at = $5
			WHERE endpoint_id = $1 AND lease_key = $2 AND token = $3 AND expires_at > $5
			AND (SELECT COUNT(*) FROM (SELECT pg_advisory_xact_lock(hashtextextended($6, 0))) adv) = 1 RETURNING 1),
			e AS (SELECT `+endpointCols+` FROM email_endpoints WHERE id = $1 AND EXISTS (SELECT 1 FROM f) FOR SHARE),
			dl AS (SELECT `+deliveryCols+` FROM email_deliveries WHERE id = $7 AND EXISTS (SELECT 1 FROM e) FOR UPDATE)
			SELECT e.*, dl.* FROM e, dl`,
			l.EndpointID, l.Key, l.Token, now.Add(l.TTL), now, lockKey, deliveryID).Scan(append(es.dests(), ds.dests()...)...)
		if err == nil {
			return es.endpoint(), ds.delivery(), nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return domain.EmailEndpoint{}, EmailDelivery{}, fmt.Errorf("renew lease %s: %w", l.Key, err)
		}
	}
	ep, err := l.FenceLockedEndpoint(ctx, tx, lockKey)
	if err != nil {
		return ep, EmailDelivery{}, err
	}
	d, err := s.GetDelivery(ctx, tx, deliveryID, true)
	return ep, d, err
}
