package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/domain"
)

const issueCols = `id, company_id, title, description, status, priority, assignee_agent_id, parent_id, project_id,
	origin_kind, origin_id, idempotency_key, execution_workspace_settings, execution_run_id, checkout_run_id,
	responsible_user_id, created_by_user_id, created_by_agent_id, created_at, updated_at, completed_at, cancelled_at, number, identifier`

func scanIssue(row rowScanner) (domain.Issue, error) {
	var i domain.Issue
	var assignee, parent, project, originID, idem, execRun, checkoutRun, responsible, byUser, byAgent sql.NullString
	var ews []byte
	var completed, cancelled sql.NullTime
	var number sql.NullInt64
	var ident sql.NullString
	err := row.Scan(&i.ID, &i.CompanyID, &i.Title, &i.Description, &i.Status, &i.Priority, &assignee, &parent, &project,
		&i.OriginKind, &originID, &idem, &ews, &execRun, &checkoutRun, &responsible, &byUser, &byAgent,
		&i.CreatedAt, &i.UpdatedAt, &completed, &cancelled, &number, &ident)
	if err != nil {
		return i, err
	}
	i.Number, i.Identifier = number.Int64, ident.String
	i.AssigneeAgentID, i.ParentID, i.ProjectID = assignee.String, parent.String, project.String
	i.OriginID, i.IdempotencyKey = originID.String, idem.String
	i.ExecutionWorkspaceSettings = rawJSON(ews)
	i.ExecutionRunID, i.CheckoutRunID = execRun.String, checkoutRun.String
	i.ResponsibleUserID, i.CreatedByUserID, i.CreatedByAgentID = responsible.String, byUser.String, byAgent.String
	i.CreatedAt, i.UpdatedAt = i.CreatedAt.UTC(), i.UpdatedAt.UTC()
	i.CompletedAt, i.CancelledAt = timePtr(completed), timePtr(cancelled)
	return i, nil
}

// CreateIssue inserts i. When i.IdempotencyKey is set and a task with that
// key already exists in the company, it returns the existing task and
// created=false instead of inserting (ON CONFLICT DO NOTHING, then read).
func (s *Store) CreateIssue(ctx context.Context, q db.Querier, i *domain.Issue) (created bool, err error) {
	return s.createIssue(ctx, q, i, true)
}

// CreateIssueUnnumbered is CreateIssue without the task's number and
// identifier: the caller gives them with NumberIssues later in the same
// transaction, for every task it created there at once.
//
// Why: the number comes from the company's counter row, and on
// PostgreSQL the increment holds that row's lock until commit, so every
// other transaction creating a task in the company waits for this whole
// transaction. A receiving transaction creates a task at its start and
// goes on retaining mail and recording wakes (for up to sixteen new
// threads in a shared one), so numbering at creation made new-thread mail
// of one company commit one transaction at a time. Numbered last, the
// lock is held only for the numbering statement and the commit.
func (s *Store) CreateIssueUnnumbered(ctx context.Context, q db.Querier, i *domain.Issue) (created bool, err error) {
	return s.createIssue(ctx, q, i, false)
}

// NumberIssues gives the tasks ids of one company, created unnumbered in
// this transaction (CreateIssueUnnumbered), the company's next numbers in
// the order of ids, with one increment of the counter (one statement on
// PostgreSQL).
func (s *Store) NumberIssues(ctx context.Context, q db.Querier, companyID string, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	if s.DB.Dialect == db.Postgres {
		_, err := q.ExecContext(ctx, `WITH c AS (UPDATE companies SET issue_counter = issue_counter + $2 WHERE id = $1
			RETURNING issue_counter - $2 AS base, issue_prefix)
			UPDATE issues SET number = c.base + v.ord, identifier = c.issue_prefix || '-' || (c.base + v.ord)
			FROM c, unnest($3::text[]) WITH ORDINALITY AS v(id, ord) WHERE issues.id = v.id AND issues.company_id = $1`,
			companyID, len(ids), ids)
		if err != nil {
			return fmt.Errorf("number issues: %w", err)
		}
		return nil
	}
	var last int64
	var prefix string
	if err := q.QueryRowContext(ctx, `UPDATE companies SET issue_counter = issue_counter + $2 WHERE id = $1
		RETURNING issue_counter, issue_prefix`, companyID, len(ids)).Scan(&last, &prefix); err != nil {
		return fmt.Errorf("number issues: %w", err)
	}
	base := last - int64(len(ids))
	for k, id := range ids {
		n := base + int64(k) + 1
		if _, err := q.ExecContext(ctx, `UPDATE issues SET number = $2, identifier = $3 WHERE id = $1 AND company_id = $4`,
			id, n, prefix+"-"+strconv.FormatInt(n, 10), companyID); err != nil {
			return fmt.Errorf("number issues: %w", err)
		}
	}
	return nil
}

// newIssue gives i its id, times and the defaults of an unset status,
// priority and origin.
func (s *Store) newIssue(i *domain.Issue) {
	i.ID = NewID()
	i.CreatedAt = s.Now()
	i.UpdatedAt = i.CreatedAt
	if i.Status == "" {
		i.Status = domain.IssueTodo
	}
	if i.Priority == "" {
		i.Priority = "medium"
	}
	if i.OriginKind == "" {
		i.OriginKind = "manual"
	}
}

func (s *Store) createIssue(ctx context.Context, q db.Querier, i *domain.Issue, numbered bool) (created bool, err error) {
	s.newIssue(i)
	// The company's next number: an atomic increment, so two tasks never
	// share one (an idempotent repeat below leaves a gap, which is fine).
	i.Number, i.Identifier = 0, ""
	if numbered {
		var prefix string
		if err := q.QueryRowContext(ctx, `UPDATE companies SET issue_counter = issue_counter + 1 WHERE id = $1
			RETURNING issue_counter, issue_prefix`, i.CompanyID).Scan(&i.Number, &prefix); err != nil {
			return false, fmt.Errorf("create issue: number: %w", err)
		}
		i.Identifier = prefix + "-" + strconv.FormatInt(i.Number, 10)
	}
	res, err := q.ExecContext(ctx, insertIssueSQL, issueArgs(i, numbered)...)
	if err != nil {
		return false, fmt.Errorf("create issue: %w", err)
	}
	return insertedOrExisting(res, i, func() (domain.Issue, error) { return s.existingIssue(ctx, q, i) })
}

// insertIssueSQL inserts one task (issueArgs), nothing when its
// idempotency key is taken.
const insertIssueSQL = `INSERT INTO issues (` + issueCols + `)
		VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15,$16,$17,$18,$19,$20,$21,$22,$23,$24)
		ON CONFLICT (company_id, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING`

// issueArgs are the arguments of insertIssueSQL for i; the number is NULL
// unless numbered (until NumberIssues: the (company, number) index is
// unique).
func issueArgs(i *domain.Issue, numbered bool) []any {
	var number any
	if numbered {
		number = i.Number
	}
	return []any{i.ID, i.CompanyID, i.Title, i.Description, i.Status, i.Priority, nullString(i.AssigneeAgentID),
		nullString(i.ParentID), nullString(i.ProjectID), i.OriginKind, nullString(i.OriginID), nullString(i.IdempotencyKey),
		nullJSON(i.ExecutionWorkspaceSettings), nullString(i.ExecutionRunID), nullString(i.CheckoutRunID),
		nullString(i.ResponsibleUserID), nullString(i.CreatedByUserID), nullString(i.CreatedByAgentID),
		i.CreatedAt, i.UpdatedAt, nullTime(i.CompletedAt), nullTime(i.CancelledAt), number, nullString(i.Identifier)}
}

// existingIssue reads the task holding i's idempotency key.
func (s *Store) existingIssue(ctx context.Context, q db.Querier, i *domain.Issue) (domain.Issue, error) {
	return queryOne(ctx, q, "create issue: read existing", scanIssue,
		`SELECT `+issueCols+` FROM issues WHERE company_id = $1 AND idempotency_key = $2`, i.CompanyID, i.IdempotencyKey)
}

// IssueIdentifierPattern matches a short task identifier (ACME-12).
var IssueIdentifierPattern = regexp.MustCompile(`^[A-Za-z0-9]{1,12}-[0-9]{1,12}$`)

// IssuesByIdentifier returns the tasks with a short identifier (ACME-12,
// any case), of one company when companyID is set. Prefixes are unique
// per company but not guaranteed across companies, so without a company
// more than one task can answer.
func (s *Store) IssuesByIdentifier(ctx context.Context, q db.Querier, companyID, ident string) ([]domain.Issue, error) {
	ident = strings.ToUpper(ident)
	if companyID != "" {
		return queryAll(ctx, q, "find issue", scanIssue, `SELECT `+issueCols+` FROM issues WHERE identifier = $1 AND company_id = $2`,
			ident, companyID)
	}
	return queryAll(ctx, q, "find issue", scanIssue, `SELECT `+issueCols+` FROM issues WHERE identifier = $1`, ident)
}

// ErrBadIssueRef is ResolveIssueRef's answer to a value that is neither a
// UUID nor a short task identifier.
var ErrBadIssueRef = errors.New("must be a UUID or a task identifier such as ACME-12")

// ResolveIssueRef turns a task reference of a request in one company into
// the task's UUID: a UUID is returned unchanged (its caller loads the task
// and checks its company, as for any id), a short identifier (ACME-12, any
// case) is looked up in companyID only, so that it never names another
// company's task (NotFound "lookup task" when the company has none).
// Anything else is ErrBadIssueRef. Every edge that takes a task id (path,
// query, body) resolves through here.
func (s *Store) ResolveIssueRef(ctx context.Context, q db.Querier, companyID, ref string) (string, error) {
	if ValidID(ref) {
		return ref, nil
	}
	if !IssueIdentifierPattern.MatchString(ref) {
		return "", ErrBadIssueRef
	}
	found, err := s.IssuesByIdentifier(ctx, q, companyID, ref)
	if err != nil {
		return "", err
	}
	if companyID == "" || len(found) != 1 {
		return "", NotFound("lookup task")
	}
	return found[0].ID, nil
}

// GetIssue returns a task by id.
func (s *Store) GetIssue(ctx context.Context, q db.Querier, id string) (domain.Issue, error) {
	return queryOne(ctx, q, "get issue", scanIssue, `SELECT `+issueCols+` FROM issues WHERE id = $1`, id)
}

// UpdateIssue writes the mutable fields of i, maintaining completedAt and
// cancelledAt from the status.
func (s *Store) UpdateIssue(ctx context.Context, q db.Querier, i *domain.Issue) error {
	now := s.Now()
	i.UpdatedAt = now
	switch i.Status {
	case domain.IssueDone:
		if i.CompletedAt == nil {
			i.CompletedAt = &now
		}
		i.CancelledAt = nil
	case domain.IssueCancelled:
		if i.CancelledAt == nil {
			i.CancelledAt = &now
		}
		i.CompletedAt = nil
	default:
		i.CompletedAt, i.CancelledAt = nil, nil
	}
	return execOne(ctx, q, "update issue", "update issue", `UPDATE issues SET title = $2, description = $3, status = $4, priority = $5,
		assignee_agent_id = $6, parent_id = $7, project_id = $8, execution_workspace_settings = $9,
		execution_run_id = $10, checkout_run_id = $11, responsible_user_id = $12, updated_at = $13,
		completed_at = $14, cancelled_at = $15 WHERE id = $1`,
		i.ID, i.Title, i.Description, i.Status, i.Priority, nullString(i.AssigneeAgentID), nullString(i.ParentID),
		nullString(i.ProjectID), nullJSON(i.ExecutionWorkspaceSettings), nullString(i.ExecutionRunID),
		nullString(i.CheckoutRunID), nullString(i.ResponsibleUserID), now, nullTime(i.CompletedAt), nullTime(i.CancelledAt))
}

// IssueFilter narrows ListIssues; empty fields do not filter.
type IssueFilter struct {
	AssigneeAgentID string
	Status          string
	ParentID        string
	OriginKind      string
	// Origin is "email" (tasks opened by an email conversation) or
	// "other" (every other task).
	Origin string
	// EndpointID keeps the tasks with a conversation in that inbox.
	EndpointID string
	ProjectIDs []string
	// Sort is "created" (the default), "updated" or "priority"; every
	// order is newest first within its key.
	Sort string
	// Limit bounds the rows returned (0: 500); After continues a listing
	// in the same Sort (a keyset cursor, see Page).
	Limit int
	After *Cursor
}

// IssueSorts are the orders ListIssues accepts.
var IssueSorts = []string{"created", "updated", "priority"}

// issuePriorityRank orders priorities most urgent first.
const issuePriorityRank = `(CASE priority WHEN 'critical' THEN 0 WHEN 'high' THEN 1 WHEN 'medium' THEN 2 ELSE 3 END)`

// IssuePriorityRank is the rank of a priority in the "priority" order.
func IssuePriorityRank(p string) int {
	switch p {
	case "critical":
		return 0
	case "high":
		return 1
	case "medium":
		return 2
	}
	return 3
}

// IssueCursor is the cursor after task i in the listing order sort.
func IssueCursor(i domain.Issue, sort string) Cursor {
	switch sort {
	case "updated":
		return Cursor{At: i.UpdatedAt, ID: i.ID}
	case "priority":
		return Cursor{At: i.CreatedAt, ID: i.ID, Key: strconv.Itoa(IssuePriorityRank(i.Priority))}
	}
	return Cursor{At: i.CreatedAt, ID: i.ID}
}

// ListIssues returns a company's tasks in f.Sort order (newest first).
// Paging is keyset: f.After continues after a row of an earlier page.
func (s *Store) ListIssues(ctx context.Context, q db.Querier, companyID string, f IssueFilter) ([]domain.Issue, error) {
	where := []string{"company_id = $1"}
	args := []any{companyID}
	add := func(col, v string) {
		if v != "" {
			args = append(args, v)
			where = append(where, fmt.Sprintf("%s = $%d", col, len(args)))
		}
	}
	add("assignee_agent_id", f.AssigneeAgentID)
	add("status", f.Status)
	add("parent_id", f.ParentID)
	add("origin_kind", f.OriginKind)
	switch f.Origin {
	case "email":
		where = append(where, "origin_kind = 'chat_channel' AND origin_id LIKE 'email%'")
	case "other":
		where = append(where, "NOT (COALESCE(origin_kind, '') = 'chat_channel' AND COALESCE(origin_id, '') LIKE 'email%')")
	}
	if f.EndpointID != "" {
		args = append(args, f.EndpointID)
		where = append(where, fmt.Sprintf("id IN (SELECT issue_id FROM email_conversations WHERE endpoint_id = $%d)", len(args)))
	}
	if f.ProjectIDs != nil {
		if len(f.ProjectIDs) == 0 {
			return []domain.Issue{}, nil
		}
		ph := make([]string, len(f.ProjectIDs))
		for k, p := range f.ProjectIDs {
			args = append(args, p)
			ph[k] = fmt.Sprintf("$%d", len(args))
		}
		where = append(where, "project_id IN ("+strings.Join(ph, ", ")+")")
	}
	limit := f.Limit
	if limit <= 0 {
		limit = 500
	}
	timeCol := "created_at"
	if f.Sort == "updated" {
		timeCol = "updated_at"
	}
	order := fmt.Sprintf(` ORDER BY %s DESC, id DESC LIMIT %d`, timeCol, limit)
	if f.Sort == "priority" {
		order = fmt.Sprintf(` ORDER BY %s, created_at DESC, id DESC LIMIT %d`, issuePriorityRank, limit)
	}
	if c := f.After; c != nil {
		n := len(args)
		args = append(args, c.At.UTC(), c.ID)
		// Keyset continuation on the listing's order; the pair (time, id)
		// is unique, so a row inserted meanwhile sorts before or after the
		// cursor and never shifts the rows still to come.
		cont := fmt.Sprintf("(%[1]s < $%[2]d OR (%[1]s = $%[2]d AND id < $%[3]d))", timeCol, n+1, n+2)
		if f.Sort == "priority" {
			rank, err := strconv.Atoi(c.Key)
			if err != nil {
				return nil, fmt.Errorf("list issues: %w: a priority cursor needs a rank", ErrBadCursor)
			}
			args = append(args, rank)
			cont = fmt.Sprintf("(%[1]s > $%[2]d OR (%[1]s = $%[2]d AND %[3]s))", issuePriorityRank, n+3, cont)
		}
		where = append(where, cont)
	}
	query := `SELECT ` + issueCols + ` FROM issues WHERE ` + strings.Join(where, " AND ") + order
	return queryAll(ctx, q, "list issues", scanIssue, query, args...)
}

// IssueAncestors returns the ids of i's ancestors, nearest first (bounded to
// guard against cycles).
func (s *Store) IssueAncestors(ctx context.Context, q db.Querier, issueID string) ([]string, error) {
	var out []string
	cur := issueID
	for range 64 {
		var parent sql.NullString
		err := q.QueryRowContext(ctx, `SELECT parent_id FROM issues WHERE id = $1`, cur).Scan(&parent)
		if err != nil {
			return nil, notFound("issue ancestors", err)
		}
		if !parent.Valid || parent.String == "" {
			return out, nil
		}
		out = append(out, parent.String)
		cur = parent.String
	}
	return out, nil
}

// LockIssueStatus returns a task's status and assignee inside a
// transaction, holding its row lock on PostgreSQL so a reopen decision is
// not raced by a concurrent status change.
func (s *Store) LockIssueStatus(ctx context.Context, tx *sql.Tx, issueID string) (status, assignee string, err error) {
	var a sql.NullString
	err = tx.QueryRowContext(ctx, `SELECT status, assignee_agent_id FROM issues WHERE id = $1`+s.DB.ForUpdate(), issueID).Scan(&status, &a)
	if err != nil {
		return "", "", notFound("get issue", err)
	}
	return status, a.String, nil
}

// SetIssueStatus changes only a task's status (with its completion and
// cancellation times), for the email reopen rule.
func (s *Store) SetIssueStatus(ctx context.Context, q db.Querier, issueID, status string) error {
	now := s.Now()
	_, err := q.ExecContext(ctx, `UPDATE issues SET status = $2, updated_at = $3, completed_at = NULL, cancelled_at = NULL WHERE id = $1`,
		issueID, status, now)
	if err != nil {
		return fmt.Errorf("update issue status: %w", err)
	}
	return nil
}

// IssueStatus returns a task's status without locking it. The inbound
// worker reads the status this way and makes the one transition it
// performs (done → todo) with ReopenDoneIssue, a conditional update, so
// the decision is still atomic while the task row is not locked before the
// wake locks the agent row: the scheduler locks agent then task, and taking
// them in the opposite order could deadlock.
func (s *Store) IssueStatus(ctx context.Context, q db.Querier, issueID string) (string, error) {
	var status string
	if err := q.QueryRowContext(ctx, `SELECT status FROM issues WHERE id = $1`, issueID).Scan(&status); err != nil {
		return "", notFound("get issue", err)
	}
	return status, nil
}

// ReopenDoneIssue moves a task from done to todo (clearing its completion
// and cancellation times) and reports whether it did: false means the task
// was no longer done when the update ran.
func (s *Store) ReopenDoneIssue(ctx context.Context, q db.Querier, issueID string) (bool, error) {
	res, err := q.ExecContext(ctx, `UPDATE issues SET status = $2, updated_at = $3, completed_at = NULL, cancelled_at = NULL
		WHERE id = $1 AND status = $4`, issueID, domain.IssueTodo, s.Now(), domain.IssueDone)
	if err != nil {
		return false, fmt.Errorf("reopen issue: %w", err)
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

// BindRunToIssue makes runID the task's checkout and execution run (the run
// works on the task now).
func (s *Store) BindRunToIssue(ctx context.Context, q db.Querier, issueID, runID string) error {
	if _, err := q.ExecContext(ctx, `UPDATE issues SET checkout_run_id = $2, execution_run_id = $2 WHERE id = $1`, issueID, runID); err != nil {
		return fmt.Errorf("bind run to task: %w", err)
	}
	return nil
}

// ReleaseIssueCheckout clears the task's checkout if runID still holds it.
func (s *Store) ReleaseIssueCheckout(ctx context.Context, q db.Querier, issueID, runID string) error {
	if _, err := q.ExecContext(ctx, `UPDATE issues SET checkout_run_id = NULL WHERE id = $1 AND checkout_run_id = $2`, issueID, runID); err != nil {
		return fmt.Errorf("release task checkout: %w", err)
	}
	return nil
}
