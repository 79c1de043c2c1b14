package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/domain"
)

const agentCols = `id, company_id, name, status, adapter_type, adapter_config, permissions,
	budget_monthly_cents, spent_monthly_cents, spend_period, environment_id, created_at, updated_at, host_execution_approved`

func scanAgent(row rowScanner) (domain.Agent, error) {
	var a domain.Agent
	var cfg, perms []byte
	var env sql.NullString
	err := row.Scan(&a.ID, &a.CompanyID, &a.Name, &a.Status, &a.AdapterType, &cfg, &perms,
		&a.BudgetMonthlyCents, &a.SpentMonthlyCents, &a.SpendPeriod, &env, &a.CreatedAt, &a.UpdatedAt, &a.HostExecutionApproved)
	if err != nil {
		return a, err
	}
	a.AdapterConfig = rawJSON(cfg)
	a.EnvironmentID = env.String
	a.CreatedAt, a.UpdatedAt = a.CreatedAt.UTC(), a.UpdatedAt.UTC()
	if err := json.Unmarshal(perms, &a.Permissions); err != nil {
		return a, fmt.Errorf("decode agent permissions: %w", err)
	}
	return a, nil
}

// CreateAgent inserts a. ID and timestamps are set here.
func (s *Store) CreateAgent(ctx context.Context, q db.Querier, a *domain.Agent) error {
	a.ID = NewID()
	a.CreatedAt = s.Now()
	a.UpdatedAt = a.CreatedAt
	if a.Status == "" {
		a.Status = domain.AgentActive
	}
	if a.Permissions.TrustPreset == "" {
		a.Permissions.TrustPreset = domain.TrustStandard
	}
	if len(a.AdapterConfig) == 0 {
		a.AdapterConfig = json.RawMessage(`{}`)
	}
	_, err := q.ExecContext(ctx, `INSERT INTO agents (`+agentCols+`) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14)`,
		a.ID, a.CompanyID, a.Name, a.Status, a.AdapterType, string(a.AdapterConfig), mustJSON(a.Permissions),
		a.BudgetMonthlyCents, a.SpentMonthlyCents, a.SpendPeriod, nullString(a.EnvironmentID), a.CreatedAt, a.UpdatedAt,
		a.HostExecutionApproved)
	if err != nil {
		return fmt.Errorf("create agent: %w", err)
	}
	return nil
}

// GetAgent returns an agent by id.
func (s *Store) GetAgent(ctx context.Context, q db.Querier, id string) (domain.Agent, error) {
	return queryOne(ctx, q, "get agent", scanAgent, `SELECT `+agentCols+` FROM agents WHERE id = $1`, id)
}

// LockAgent takes the agent row's write lock for the rest of the transaction
// (PostgreSQL row lock; SQLite's single writer already serializes), so
// decisions such as "is another run of this agent running?" cannot race
// between replicas.
func (s *Store) LockAgent(ctx context.Context, tx *sql.Tx, id string) error {
	return execOne(ctx, tx, "lock agent", "lock agent", `UPDATE agents SET updated_at = updated_at WHERE id = $1`, id)
}

// AgentShared returns an agent holding a shared row lock on PostgreSQL
// (FOR SHARE) until the transaction ends; SQLite's single writer already
// serializes. Why shared: a wake that does not coalesce only needs the
// agent's status and budget to stay as read until it commits, so a pause,
// a spend update or the scheduler's LockAgent waits for it, while other
// wakes of the same agent (one per email) go on side by side instead of
// queueing on the row.
func (s *Store) AgentShared(ctx context.Context, tx *sql.Tx, id string) (domain.Agent, error) {
	suffix := ""
	if s.DB.Dialect == db.Postgres {
		suffix = " FOR SHARE"
	}
	return queryOne(ctx, tx, "get agent", scanAgent, `SELECT `+agentCols+` FROM agents WHERE id = $1`+suffix, id)
}

// AgentSharedWithIssue is AgentShared and GetIssue(issueID) together: on
// PostgreSQL one statement (a join, the share lock on the agent row only),
// the wake's reads in one round trip. A missing agent or issue is read
// again separately, so the error names which one is missing.
func (s *Store) AgentSharedWithIssue(ctx context.Context, tx *sql.Tx, agentID, issueID string) (domain.Agent, domain.Issue, error) {
	if s.DB.Dialect == db.Postgres {
		var is domain.Issue
		a, err := scanAgent(joinedRow{tx.QueryRowContext(ctx, agentWithIssuePostgres, agentID, issueID), func(rest rowScanner) error {
			var err error
			is, err = scanIssue(rest)
			return err
		}})
		if err == nil {
			return a, is, nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return a, is, fmt.Errorf("get agent and issue: %w", err)
		}
	}
	a, err := s.AgentShared(ctx, tx, agentID)
	if err != nil {
		return a, domain.Issue{}, err
	}
	is, err := s.GetIssue(ctx, tx, issueID)
	return a, is, err
}

var agentWithIssuePostgres = `SELECT ` + prefixCols("a.", agentCols) + `, ` + prefixCols("i.", issueCols) +
	` FROM agents a JOIN issues i ON i.id = $2 WHERE a.id = $1 FOR SHARE OF a`

// UpdateAgent writes every mutable field of a.
func (s *Store) UpdateAgent(ctx context.Context, q db.Querier, a *domain.Agent) error {
	a.UpdatedAt = s.Now()
	return execOne(ctx, q, "update agent", "update agent", `UPDATE agents SET name = $2, status = $3, adapter_type = $4, adapter_config = $5,
		permissions = $6, budget_monthly_cents = $7, spent_monthly_cents = $8, spend_period = $9, environment_id = $10, updated_at = $11,
		host_execution_approved = $12
		WHERE id = $1`, a.ID, a.Name, a.Status, a.AdapterType, string(a.AdapterConfig), mustJSON(a.Permissions),
		a.BudgetMonthlyCents, a.SpentMonthlyCents, a.SpendPeriod, nullString(a.EnvironmentID), a.UpdatedAt, a.HostExecutionApproved)
}

// ListAgents returns a company's agents, newest first.
func (s *Store) ListAgents(ctx context.Context, q db.Querier, companyID string) ([]domain.Agent, error) {
	return queryAll(ctx, q, "list agents", scanAgent, `SELECT `+agentCols+` FROM agents WHERE company_id = $1 ORDER BY created_at DESC, id`, companyID)
}

const projectCols = `id, company_id, name, workspace, created_at, updated_at`

func scanProject(row rowScanner) (domain.Project, error) {
	var p domain.Project
	var ws []byte
	if err := row.Scan(&p.ID, &p.CompanyID, &p.Name, &ws, &p.CreatedAt, &p.UpdatedAt); err != nil {
		return p, err
	}
	p.CreatedAt, p.UpdatedAt = p.CreatedAt.UTC(), p.UpdatedAt.UTC()
	if len(ws) > 0 && string(ws) != "null" {
		p.Workspace = &domain.ProjectWorkspace{}
		if err := json.Unmarshal(ws, p.Workspace); err != nil {
			return p, fmt.Errorf("decode project workspace: %w", err)
		}
	}
	return p, nil
}

// CreateProject inserts p.
func (s *Store) CreateProject(ctx context.Context, q db.Querier, p *domain.Project) error {
	p.ID = NewID()
	p.CreatedAt = s.Now()
	p.UpdatedAt = p.CreatedAt
	var ws any
	if p.Workspace != nil {
		ws = mustJSON(p.Workspace)
	}
	_, err := q.ExecContext(ctx, `INSERT INTO projects (`+projectCols+`) VALUES ($1,$2,$3,$4,$5,$6)`,
		p.ID, p.CompanyID, p.Name, ws, p.CreatedAt, p.UpdatedAt)
	if err != nil {
		return fmt.Errorf("create project: %w", err)
	}
	return nil
}

// GetProject returns a project by id.
func (s *Store) GetProject(ctx context.Context, q db.Querier, id string) (domain.Project, error) {
	return queryOne(ctx, q, "get project", scanProject, `SELECT `+projectCols+` FROM projects WHERE id = $1`, id)
}

// ListProjects returns a company's projects, newest first.
func (s *Store) ListProjects(ctx context.Context, q db.Querier, companyID string) ([]domain.Project, error) {
	return queryAll(ctx, q, "list projects", scanProject, `SELECT `+projectCols+` FROM projects WHERE company_id = $1 ORDER BY created_at DESC, id`, companyID)
}

const envCols = `id, company_id, name, driver, provider, status, created_at, updated_at, allow_network`

func scanEnvironment(row rowScanner) (domain.Environment, error) {
	var e domain.Environment
	err := row.Scan(&e.ID, &e.CompanyID, &e.Name, &e.Driver, &e.Provider, &e.Status, &e.CreatedAt, &e.UpdatedAt, &e.AllowNetwork)
	e.CreatedAt, e.UpdatedAt = e.CreatedAt.UTC(), e.UpdatedAt.UTC()
	return e, err
}

// CreateEnvironment inserts e.
func (s *Store) CreateEnvironment(ctx context.Context, q db.Querier, e *domain.Environment) error {
	e.ID = NewID()
	e.CreatedAt = s.Now()
	e.UpdatedAt = e.CreatedAt
	if e.Status == "" {
		e.Status = "active"
	}
	_, err := q.ExecContext(ctx, `INSERT INTO environments (`+envCols+`) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9)`,
		e.ID, e.CompanyID, e.Name, e.Driver, e.Provider, e.Status, e.CreatedAt, e.UpdatedAt, e.AllowNetwork)
	if err != nil {
		return fmt.Errorf("create environment: %w", err)
	}
	return nil
}

// GetEnvironment returns an environment by id.
func (s *Store) GetEnvironment(ctx context.Context, q db.Querier, id string) (domain.Environment, error) {
	return queryOne(ctx, q, "get environment", scanEnvironment, `SELECT `+envCols+` FROM environments WHERE id = $1`, id)
}

// ListEnvironments returns a page of a company's environments, newest
// first.
func (s *Store) ListEnvironments(ctx context.Context, q db.Querier, companyID string, p Page) ([]domain.Environment, error) {
	return listPage(ctx, q, "list environments", scanEnvironment, `SELECT `+envCols+` FROM environments`, `company_id = $1`,
		[]any{companyID}, "created_at", "id", p)
}

// UpdateEnvironment writes e's status and network switch.
func (s *Store) UpdateEnvironment(ctx context.Context, q db.Querier, e *domain.Environment) error {
	e.UpdatedAt = s.Now()
	_, err := q.ExecContext(ctx, `UPDATE environments SET status = $2, allow_network = $3, updated_at = $4 WHERE id = $1`,
		e.ID, e.Status, e.AllowNetwork, e.UpdatedAt)
	if err != nil {
		return fmt.Errorf("update environment: %w", err)
	}
	return nil
}
