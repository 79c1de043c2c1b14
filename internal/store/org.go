package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
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
	return queryOne(ctx, q, "get user", scanUser, `SELECT `+userCols+` FROM users WHERE id = $1`, id)
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
	prefix, err := s.freeIssuePrefix(ctx, q, name)
	if err != nil {
		return c, err
	}
	if _, err := q.ExecContext(ctx, `INSERT INTO companies (id, name, created_at, updated_at, issue_prefix) VALUES ($1, $2, $3, $4, $5)`,
		c.ID, c.Name, now, now, prefix); err != nil {
		return c, fmt.Errorf("create company: %w", err)
	}
	if ownerUserID != "" {
		if _, err := s.PutMembership(ctx, q, c.ID, ownerUserID, domain.RoleOwner, nil); err != nil {
			return c, err
		}
	}
	return c, nil
}

// freeIssuePrefix is the task identifier prefix of a new company: the
// first four letters or digits of its name, upper-cased ("TASK" for a name
// without any), with a number added when another company has it (ACME,
// ACME2, …). Two companies created at the same moment can still share one;
// an identifier is then looked up within the caller's companies.
func (s *Store) freeIssuePrefix(ctx context.Context, q db.Querier, name string) (string, error) {
	var b strings.Builder
	for _, r := range strings.ToUpper(name) {
		if (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
			if b.Len() == 4 {
				break
			}
		}
	}
	base := b.String()
	if base == "" {
		base = "TASK"
	}
	for n := 1; n < 1000; n++ {
		p := base
		if n > 1 {
			p = base + strconv.Itoa(n)
		}
		var taken int
		if err := q.QueryRowContext(ctx, `SELECT COUNT(*) FROM companies WHERE issue_prefix = $1`, p).Scan(&taken); err != nil {
			return "", fmt.Errorf("create company: prefix: %w", err)
		}
		if taken == 0 {
			return p, nil
		}
	}
	return base + strconv.Itoa(int(s.Now().UnixNano()%100000)), nil
}

// GetCompany returns a company by id.
func (s *Store) GetCompany(ctx context.Context, q db.Querier, id string) (domain.Company, error) {
	return queryOne(ctx, q, "get company", scanCompany, `SELECT `+companyCols+` FROM companies WHERE id = $1`, id)
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
	return queryAll(ctx, q, "list companies", scanCompany, query, args...)
}

// ListCompaniesPage returns a page of ListCompanies: all companies when
// userID is empty, otherwise those the user is a member of, newest first.
func (s *Store) ListCompaniesPage(ctx context.Context, q db.Querier, userID string, p Page) ([]domain.Company, error) {
	if userID == "" {
		return listPage(ctx, q, "list companies", scanCompany, `SELECT `+companyCols+` FROM companies`, `1 = 1`, nil,
			"created_at", "id", p)
	}
	return listPage(ctx, q, "list companies", scanCompany, `SELECT c.id, c.name, c.created_at, c.updated_at FROM companies c
		JOIN company_memberships m ON m.company_id = c.id`, `m.user_id = $1`, []any{userID}, "c.created_at", "c.id", p)
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

// membershipSelect reads memberships with their user's email.
const membershipSelect = `SELECT m.company_id, m.user_id, u.email, m.role, m.permissions, m.created_at
		FROM company_memberships m JOIN users u ON u.id = m.user_id`

// errMembershipPermissions marks a membership row whose permissions do
// not decode.
var errMembershipPermissions = errors.New("decode permissions")

func scanMembership(row rowScanner) (domain.Membership, error) {
	var m domain.Membership
	var perms []byte
	if err := row.Scan(&m.CompanyID, &m.UserID, &m.Email, &m.Role, &perms, &m.CreatedAt); err != nil {
		return m, err
	}
	m.CreatedAt = m.CreatedAt.UTC()
	if err := json.Unmarshal(perms, &m.Permissions); err != nil {
		return m, fmt.Errorf("%w: %w", errMembershipPermissions, err)
	}
	return m, nil
}

// GetMembership returns a user's membership in a company.
func (s *Store) GetMembership(ctx context.Context, q db.Querier, companyID, userID string) (domain.Membership, error) {
	return queryOne(ctx, q, "get membership", scanMembership,
		membershipSelect+` WHERE m.company_id = $1 AND m.user_id = $2`, companyID, userID)
}

// ListMembers returns a company's memberships. A row whose permissions
// do not decode is listed with what decoded (the member list stays
// readable for the owner who repairs it).
func (s *Store) ListMembers(ctx context.Context, q db.Querier, companyID string) ([]domain.Membership, error) {
	lenient := func(row rowScanner) (domain.Membership, error) {
		m, err := scanMembership(row)
		if errors.Is(err, errMembershipPermissions) {
			err = nil
		}
		return m, err
	}
	return queryAll(ctx, q, "list members", lenient, membershipSelect+` WHERE m.company_id = $1 ORDER BY m.created_at DESC`, companyID)
}

// ErrLastOwner refuses a change that would leave a company without an
// owner (a conflict: the company's other memberships decide it).
var ErrLastOwner = fmt.Errorf("%w: a company must keep an owner; make another member owner first", ErrConflict)

// LockMemberships serializes membership changes of a company inside tx
// and returns userID's current membership (ErrNotFound when none). When
// the change would take userID's owner role away (newRole is not owner;
// "" means removal) and userID is the last owner, it returns ErrLastOwner.
func (s *Store) LockMemberships(ctx context.Context, tx *sql.Tx, companyID, userID, newRole string) (domain.Membership, error) {
	// Why lock the company row: two concurrent demotions of two owners
	// would each count the other and leave none. On PostgreSQL the row
	// lock orders them; SQLite's single writer (BEGIN IMMEDIATE) already
	// does.
	var id string
	if err := tx.QueryRowContext(ctx, `SELECT id FROM companies WHERE id = $1`+s.DB.ForUpdate(), companyID).Scan(&id); err != nil {
		return domain.Membership{}, notFound("get company", err)
	}
	m, err := s.GetMembership(ctx, tx, companyID, userID)
	if err != nil || m.Role != domain.RoleOwner || newRole == domain.RoleOwner {
		return m, err
	}
	var owners int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM company_memberships WHERE company_id = $1 AND role = $2`,
		companyID, domain.RoleOwner).Scan(&owners); err != nil {
		return m, fmt.Errorf("count owners: %w", err)
	}
	if owners <= 1 {
		return m, ErrLastOwner
	}
	return m, nil
}

// DeleteMembership removes a user from a company and revokes the user's
// board keys scoped to it.
func (s *Store) DeleteMembership(ctx context.Context, tx *sql.Tx, companyID, userID string) error {
	if _, err := tx.ExecContext(ctx, `DELETE FROM company_memberships WHERE company_id = $1 AND user_id = $2`, companyID, userID); err != nil {
		return fmt.Errorf("delete membership: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE board_api_keys SET revoked_at = $3 WHERE company_id = $1 AND user_id = $2 AND revoked_at IS NULL`,
		companyID, userID, s.Now()); err != nil {
		return fmt.Errorf("revoke member keys: %w", err)
	}
	return nil
}
