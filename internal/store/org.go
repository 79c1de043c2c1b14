package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/domain"
)

// LocalBoardEmail is the email of the implicit board user in local_trusted mode.
const LocalBoardEmail = "local-board@localhost"

// GetSettings returns the instance settings (defaults when never saved).
func (s *Store) GetSettings(ctx context.Context, q db.Querier) (domain.InstanceSettings, error) {
	var raw []byte
	var out domain.InstanceSettings
	err := q.QueryRowContext(ctx, `SELECT settings FROM instance_settings WHERE id = 1`).Scan(&raw)
	if err == sql.ErrNoRows {
		return out, nil
	}
	if err != nil {
		return out, fmt.Errorf("get settings: %w", err)
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return out, fmt.Errorf("get settings: decode: %w", err)
	}
	return out, nil
}

// PutSettings saves the instance settings.
func (s *Store) PutSettings(ctx context.Context, q db.Querier, v domain.InstanceSettings) error {
	_, err := q.ExecContext(ctx, `INSERT INTO instance_settings (id, settings, updated_at) VALUES (1, $1, $2)
		ON CONFLICT (id) DO UPDATE SET settings = excluded.settings, updated_at = excluded.updated_at`,
		mustJSON(v), s.Now())
	if err != nil {
		return fmt.Errorf("put settings: %w", err)
	}
	return nil
}

const userCols = `id, email, name, is_instance_admin, created_at`

func scanUser(row rowScanner) (domain.User, error) {
	var u domain.User
	err := row.Scan(&u.ID, &u.Email, &u.Name, &u.IsInstanceAdmin, &u.CreatedAt)
	u.CreatedAt = u.CreatedAt.UTC()
	return u, err
}

// EnsureUser returns the user with email, creating it when absent.
func (s *Store) EnsureUser(ctx context.Context, q db.Querier, email, name string, admin bool) (domain.User, error) {
	email = strings.ToLower(strings.TrimSpace(email))
	_, err := q.ExecContext(ctx, `INSERT INTO users (id, email, name, is_instance_admin, created_at)
		VALUES ($1, $2, $3, $4, $5) ON CONFLICT (email) DO NOTHING`, NewID(), email, name, admin, s.Now())
	if err != nil {
		return domain.User{}, fmt.Errorf("ensure user: %w", err)
	}
	return s.GetUserByEmail(ctx, q, email)
}

// SetInstanceAdmin makes a user an instance administrator.
func (s *Store) SetInstanceAdmin(ctx context.Context, q db.Querier, userID string) error {
	if _, err := q.ExecContext(ctx, `UPDATE users SET is_instance_admin = TRUE WHERE id = $1`, userID); err != nil {
		return fmt.Errorf("promote user: %w", err)
	}
	return nil
}

// GetUser returns a user by id.
func (s *Store) GetUser(ctx context.Context, q db.Querier, id string) (domain.User, error) {
	u, err := scanUser(q.QueryRowContext(ctx, `SELECT `+userCols+` FROM users WHERE id = $1`, id))
	if err != nil {
		return u, notFound("get user", err)
	}
	return u, nil
}

// GetUserByEmail returns a user by email.
func (s *Store) GetUserByEmail(ctx context.Context, q db.Querier, email string) (domain.User, error) {
	u, err := scanUser(q.QueryRowContext(ctx, `SELECT `+userCols+` FROM users WHERE email = $1`,
		strings.ToLower(strings.TrimSpace(email))))
	if err != nil {
		return u, notFound("get user", err)
	}
	return u, nil
}

const companyCols = `id, name, created_at, updated_at`

func scanCompany(row rowScanner) (domain.Company, error) {
	var c domain.Company
	err := row.Scan(&c.ID, &c.Name, &c.CreatedAt, &c.UpdatedAt)
	c.CreatedAt, c.UpdatedAt = c.CreatedAt.UTC(), c.UpdatedAt.UTC()
	return c, err
}

// CreateCompany inserts a company and makes ownerUserID its owner.
func (s *Store) CreateCompany(ctx context.Context, q db.Querier, name, ownerUserID string) (domain.Company, error) {
	now := s.Now()
	c := domain.Company{ID: NewID(), Name: name, CreatedAt: now, UpdatedAt: now}
	if _, err := q.ExecContext(ctx, `INSERT INTO companies (id, name, created_at, updated_at) VALUES ($1, $2, $3, $4)`,
		c.ID, c.Name, now, now); err != nil {
		return c, fmt.Errorf("create company: %w", err)
	}
	if ownerUserID != "" {
		if _, err := s.PutMembership(ctx, q, c.ID, ownerUserID, domain.RoleOwner, nil); err != nil {
			return c, err
		}
	}
	return c, nil
}

// GetCompany returns a company by id.
func (s *Store) GetCompany(ctx context.Context, q db.Querier, id string) (domain.Company, error) {
	c, err := scanCompany(q.QueryRowContext(ctx, `SELECT `+companyCols+` FROM companies WHERE id = $1`, id))
	if err != nil {
		return c, notFound("get company", err)
	}
	return c, nil
}

// ListCompanies returns companies newest first: all of them when userID is
// empty, otherwise those the user is a member of.
func (s *Store) ListCompanies(ctx context.Context, q db.Querier, userID string) ([]domain.Company, error) {
	query := `SELECT ` + companyCols + ` FROM companies ORDER BY created_at DESC, id`
	args := []any{}
	if userID != "" {
		query = `SELECT c.id, c.name, c.created_at, c.updated_at FROM companies c
			JOIN company_memberships m ON m.company_id = c.id WHERE m.user_id = $1
			ORDER BY c.created_at DESC, c.id`
		args = append(args, userID)
	}
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("list companies: %w", err)
	}
	defer rows.Close()
	out := []domain.Company{}
	for rows.Next() {
		c, err := scanCompany(rows)
		if err != nil {
			return nil, fmt.Errorf("list companies: %w", err)
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// PutMembership creates or updates a user's membership in a company.
func (s *Store) PutMembership(ctx context.Context, q db.Querier, companyID, userID, role string, perms []string) (domain.Membership, error) {
	if perms == nil {
		perms = []string{}
	}
	now := s.Now()
	_, err := q.ExecContext(ctx, `INSERT INTO company_memberships (company_id, user_id, role, permissions, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $5)
		ON CONFLICT (company_id, user_id) DO UPDATE SET role = excluded.role, permissions = excluded.permissions, updated_at = excluded.updated_at`,
		companyID, userID, role, mustJSON(perms), now)
	if err != nil {
		return domain.Membership{}, fmt.Errorf("put membership: %w", err)
	}
	return s.GetMembership(ctx, q, companyID, userID)
}

// GetMembership returns a user's membership in a company.
func (s *Store) GetMembership(ctx context.Context, q db.Querier, companyID, userID string) (domain.Membership, error) {
	var m domain.Membership
	var perms []byte
	err := q.QueryRowContext(ctx, `SELECT m.company_id, m.user_id, u.email, m.role, m.permissions, m.created_at
		FROM company_memberships m JOIN users u ON u.id = m.user_id WHERE m.company_id = $1 AND m.user_id = $2`,
		companyID, userID).Scan(&m.CompanyID, &m.UserID, &m.Email, &m.Role, &perms, &m.CreatedAt)
	if err != nil {
		return m, notFound("get membership", err)
	}
	m.CreatedAt = m.CreatedAt.UTC()
	if err := json.Unmarshal(perms, &m.Permissions); err != nil {
		return m, fmt.Errorf("get membership: decode permissions: %w", err)
	}
	return m, nil
}

// ListMembers returns a company's memberships.
func (s *Store) ListMembers(ctx context.Context, q db.Querier, companyID string) ([]domain.Membership, error) {
	rows, err := q.QueryContext(ctx, `SELECT m.company_id, m.user_id, u.email, m.role, m.permissions, m.created_at
		FROM company_memberships m JOIN users u ON u.id = m.user_id WHERE m.company_id = $1 ORDER BY m.created_at DESC`, companyID)
	if err != nil {
		return nil, fmt.Errorf("list members: %w", err)
	}
	defer rows.Close()
	out := []domain.Membership{}
	for rows.Next() {
		var m domain.Membership
		var perms []byte
		if err := rows.Scan(&m.CompanyID, &m.UserID, &m.Email, &m.Role, &perms, &m.CreatedAt); err != nil {
			return nil, fmt.Errorf("list members: %w", err)
		}
		m.CreatedAt = m.CreatedAt.UTC()
		_ = json.Unmarshal(perms, &m.Permissions)
		out = append(out, m)
	}
	return out, rows.Err()
}

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
	var k domain.BoardAPIKey
	var company sql.NullString
	err := q.QueryRowContext(ctx, `SELECT id, user_id, company_id, name, created_at FROM board_api_keys
		WHERE token_hash = $1 AND revoked_at IS NULL`, hash).Scan(&k.ID, &k.UserID, &company, &k.Name, &k.CreatedAt)
	if err != nil {
		return k, notFound("lookup board key", err)
	}
	k.CompanyID = company.String
	return k, nil
}
