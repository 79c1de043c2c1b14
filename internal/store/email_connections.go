package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/domain"
)

const emailConnCols = `id, company_id, idempotency_key, name, scope, inbox_id, organization_id, status, initial_install_ids,
	created_by_user_id, created_at, updated_at`

func scanEmailConnection(row rowScanner) (domain.EmailConnection, error) {
	var c domain.EmailConnection
	var inbox, org, creator sql.NullString
	var initial []byte
	err := row.Scan(&c.ID, &c.CompanyID, &c.IdempotencyKey, &c.Name, &c.Scope, &inbox, &org, &c.Status, &initial,
		&creator, &c.CreatedAt, &c.UpdatedAt)
	if err != nil {
		return c, err
	}
	c.Provider = "agentmail"
	c.InboxID, c.OrganizationID, c.CreatedByUserID = inbox.String, org.String, creator.String
	c.CreatedAt, c.UpdatedAt = c.CreatedAt.UTC(), c.UpdatedAt.UTC()
	if len(initial) > 0 && string(initial) != "null" {
		if err := json.Unmarshal(initial, &c.InitialInstallIDs); err != nil {
			return c, fmt.Errorf("decode initial installs: %w", err)
		}
	}
	return c, nil
}

// CreateEmailConnection inserts a saved credential. A concurrent or repeated
// insert with the same (company, idempotency key) inserts nothing and
// returns created=false with the existing row.
func (s *Store) CreateEmailConnection(ctx context.Context, q db.Querier, c *domain.EmailConnection) (bool, error) {
	c.ID = NewID()
	c.CreatedAt = s.Now()
	c.UpdatedAt = c.CreatedAt
	if c.Status == "" {
		c.Status = "active"
	}
	res, err := q.ExecContext(ctx, `INSERT INTO email_connections (`+emailConnCols+`) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12)
		ON CONFLICT (company_id, idempotency_key) DO NOTHING`,
		c.ID, c.CompanyID, c.IdempotencyKey, c.Name, c.Scope, nullString(c.InboxID), nullString(c.OrganizationID), c.Status,
		nil, nullString(c.CreatedByUserID), c.CreatedAt, c.UpdatedAt)
	if err != nil {
		return false, fmt.Errorf("create email connection: %w", err)
	}
	return insertedOrExisting(res, c, func() (domain.EmailConnection, error) {
		return s.EmailConnectionByKey(ctx, q, c.CompanyID, c.IdempotencyKey)
	})
}

// EmailConnectionByKey returns the company's connection created with key.
func (s *Store) EmailConnectionByKey(ctx context.Context, q db.Querier, companyID, key string) (domain.EmailConnection, error) {
	return queryOne(ctx, q, "get email connection", scanEmailConnection,
		`SELECT `+emailConnCols+` FROM email_connections WHERE company_id = $1 AND idempotency_key = $2`, companyID, key)
}

// GetEmailConnection returns a saved credential by id.
func (s *Store) GetEmailConnection(ctx context.Context, q db.Querier, id string) (domain.EmailConnection, error) {
	return queryOne(ctx, q, "get email connection", scanEmailConnection,
		`SELECT `+emailConnCols+` FROM email_connections WHERE id = $1`, id)
}

// LockEmailConnection takes the connection row's write lock for the rest of
// the transaction (see LockAgent).
func (s *Store) LockEmailConnection(ctx context.Context, tx *sql.Tx, id string) error {
	return execOne(ctx, tx, "lock email connection", "get email connection", `UPDATE email_connections SET updated_at = updated_at WHERE id = $1`, id)
}

// ListEmailConnections returns a page of a company's active saved
// credentials, newest first.
func (s *Store) ListEmailConnections(ctx context.Context, q db.Querier, companyID string, p Page) ([]domain.EmailConnection, error) {
	return listPage(ctx, q, "list email connections", scanEmailConnection, `SELECT `+emailConnCols+` FROM email_connections`,
		`company_id = $1 AND status = 'active'`, []any{companyID}, "created_at", "id", p)
}

// SetEmailConnectionInitialInstalls records (or, with nil, clears) the
// installs a connection was created with.
func (s *Store) SetEmailConnectionInitialInstalls(ctx context.Context, q db.Querier, id string, ids []string) error {
	var v any
	if ids != nil {
		v = mustJSON(ids)
	}
	if _, err := q.ExecContext(ctx, `UPDATE email_connections SET initial_install_ids = $2, updated_at = $3 WHERE id = $1`, id, v, s.Now()); err != nil {
		return fmt.Errorf("set initial installs: %w", err)
	}
	return nil
}

// SetEmailConnectionStatus enables or disables a saved credential.
func (s *Store) SetEmailConnectionStatus(ctx context.Context, q db.Querier, id, status string) error {
	if _, err := q.ExecContext(ctx, `UPDATE email_connections SET status = $2, updated_at = $3 WHERE id = $1`, id, status, s.Now()); err != nil {
		return fmt.Errorf("set email connection status: %w", err)
	}
	return nil
}

func scanGrant(row rowScanner) (domain.EmailGrant, error) {
	var g domain.EmailGrant
	var subject sql.NullString
	var revoked sql.NullTime
	err := row.Scan(&g.ID, &g.ConnectionID, &g.Kind, &subject, &g.Status, &g.CreatedAt, &revoked)
	g.SubjectUserID, g.RevokedAt = subject.String, timePtr(revoked)
	g.CreatedAt = g.CreatedAt.UTC()
	return g, err
}

// AddEmailGrant gives humans access to a connection.
func (s *Store) AddEmailGrant(ctx context.Context, q db.Querier, companyID string, g *domain.EmailGrant) error {
	g.ID = NewID()
	g.CreatedAt = s.Now()
	g.Status = "active"
	if _, err := q.ExecContext(ctx, `INSERT INTO email_connection_grants (id, company_id, connection_id, kind, subject_user_id, status, created_at)
		VALUES ($1,$2,$3,$4,$5,$6,$7)`, g.ID, companyID, g.ConnectionID, g.Kind, nullString(g.SubjectUserID), g.Status, g.CreatedAt); err != nil {
		return fmt.Errorf("add email grant: %w", err)
	}
	return nil
}

// ListEmailGrants returns a connection's grants (all statuses).
func (s *Store) ListEmailGrants(ctx context.Context, q db.Querier, connectionID string) ([]domain.EmailGrant, error) {
	return queryAll(ctx, q, "list email grants", scanGrant, `SELECT id, connection_id, kind, subject_user_id, status, created_at, revoked_at
		FROM email_connection_grants WHERE connection_id = $1 ORDER BY created_at, id`, connectionID)
}

// RevokeEmailGrant revokes one grant.
func (s *Store) RevokeEmailGrant(ctx context.Context, q db.Querier, connectionID, grantID string) error {
	return execOne(ctx, q, "revoke email grant", "get email grant", `UPDATE email_connection_grants SET status = 'revoked', revoked_at = $3
		WHERE connection_id = $1 AND id = $2 AND status = 'active'`, connectionID, grantID, s.Now())
}

func scanInstall(row rowScanner) (domain.EmailInstall, error) {
	var i domain.EmailInstall
	err := row.Scan(&i.ID, &i.ConnectionID, &i.TargetType, &i.TargetID, &i.CreatedAt)
	i.CreatedAt = i.CreatedAt.UTC()
	return i, err
}

// AddEmailInstall gives an agent (target_type agent) or every agent
// (company) access to a connection; an existing identical install is kept.
func (s *Store) AddEmailInstall(ctx context.Context, q db.Querier, companyID string, in *domain.EmailInstall) error {
	in.ID = NewID()
	in.CreatedAt = s.Now()
	if _, err := q.ExecContext(ctx, `INSERT INTO email_connection_installs (id, company_id, connection_id, target_type, target_id, created_at)
		VALUES ($1,$2,$3,$4,$5,$6) ON CONFLICT (connection_id, target_type, target_id) DO NOTHING`,
		in.ID, companyID, in.ConnectionID, in.TargetType, in.TargetID, in.CreatedAt); err != nil {
		return fmt.Errorf("add email install: %w", err)
	}
	return nil
}

// ListEmailInstalls returns a connection's agent access rows.
func (s *Store) ListEmailInstalls(ctx context.Context, q db.Querier, connectionID string) ([]domain.EmailInstall, error) {
	return queryAll(ctx, q, "list email installs", scanInstall, `SELECT id, connection_id, target_type, target_id, created_at
		FROM email_connection_installs WHERE connection_id = $1 ORDER BY created_at, id`, connectionID)
}

// DeleteEmailInstall removes one install.
func (s *Store) DeleteEmailInstall(ctx context.Context, q db.Querier, connectionID, installID string) error {
	return execOne(ctx, q, "delete email install", "get email install", `DELETE FROM email_connection_installs WHERE connection_id = $1 AND id = $2`, connectionID, installID)
}
