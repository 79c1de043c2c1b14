package store

import (
	"context"
	"fmt"

	"github.com/paperclipai/paperclipai/internal/db"
)

// Suppress records that an address must not be mailed from an endpoint.
func (s *Store) Suppress(ctx context.Context, q db.Querier, companyID, endpointID, address, reason string) error {
	if _, err := q.ExecContext(ctx, `INSERT INTO email_suppressions (endpoint_id, address, company_id, reason, created_at)
		VALUES ($1, $2, $3, $4, $5) ON CONFLICT (endpoint_id, address) DO NOTHING`, endpointID, address, companyID, reason, s.Now()); err != nil {
		return fmt.Errorf("suppress recipient: %w", err)
	}
	return nil
}

// SuppressedAmong returns which of addresses are suppressed for the endpoint.
func (s *Store) SuppressedAmong(ctx context.Context, q db.Querier, endpointID string, addresses []string) ([]string, error) {
	var out []string
	for _, a := range addresses {
		var n int
		if err := q.QueryRowContext(ctx, `SELECT COUNT(*) FROM email_suppressions WHERE endpoint_id = $1 AND address = $2`, endpointID, a).Scan(&n); err != nil {
			return nil, fmt.Errorf("check suppression: %w", err)
		}
		if n > 0 {
			out = append(out, a)
		}
	}
	return out, nil
}

// SuppressionsAmong returns the suppressions of the endpoint among
// addresses (lower-cased bare addresses), in the order given: address,
// reason (the receipt kind) and since when.
func (s *Store) SuppressionsAmong(ctx context.Context, q db.Querier, endpointID string, addresses []string) ([]Suppression, error) {
	var out []Suppression
	for _, a := range addresses {
		rows, err := queryAll(ctx, q, "check suppression", func(r rowScanner) (Suppression, error) {
			v := Suppression{EndpointID: endpointID, Address: a}
			err := r.Scan(&v.Reason, &v.CreatedAt)
			v.CreatedAt = v.CreatedAt.UTC()
			return v, err
		}, `SELECT reason, created_at FROM email_suppressions WHERE endpoint_id = $1 AND address = $2`, endpointID, a)
		if err != nil {
			return nil, err
		}
		out = append(out, rows...)
	}
	return out, nil
}
