package store

import (
	"context"
	"fmt"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/domain"
)

// RenameCompany changes a company's display name (its task identifier
// prefix stays, so ACME-12 keeps naming the same task).
func (s *Store) RenameCompany(ctx context.Context, q db.Querier, id, name string) (domain.Company, error) {
	res, err := q.ExecContext(ctx, `UPDATE companies SET name = $2, updated_at = $3 WHERE id = $1`, id, name, s.Now())
	if err != nil {
		return domain.Company{}, fmt.Errorf("rename company: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return domain.Company{}, NotFound("rename company")
	}
	return s.GetCompany(ctx, q, id)
}

// PauseCompanyAgents pauses every active (or pending) agent of a company,
// so the scheduler claims none of their queued runs any more, and returns
// the ids of all its agents.
func (s *Store) PauseCompanyAgents(ctx context.Context, q db.Querier, companyID string) ([]string, error) {
	if _, err := q.ExecContext(ctx, `UPDATE agents SET status = 'paused', updated_at = $2
		WHERE company_id = $1 AND status IN ('active', 'pending_approval')`, companyID, s.Now()); err != nil {
		return nil, fmt.Errorf("pause company agents: %w", err)
	}
	return queryAll(ctx, q, "company agents", func(row rowScanner) (string, error) {
		var id string
		return id, row.Scan(&id)
	}, `SELECT id FROM agents WHERE company_id = $1`, companyID)
}

// CountRunningCompanyRuns counts a company's runs that still execute.
func (s *Store) CountRunningCompanyRuns(ctx context.Context, q db.Querier, companyID string) (int, error) {
	var n int
	if err := q.QueryRowContext(ctx, `SELECT COUNT(*) FROM heartbeat_runs WHERE company_id = $1 AND status = 'running'`,
		companyID).Scan(&n); err != nil {
		return 0, fmt.Errorf("count running runs: %w", err)
	}
	return n, nil
}

// DeleteCompany deletes a company row; every table holding the company's
// data references it (directly or through its agents, tasks and inboxes)
// with ON DELETE CASCADE, so deleting the row removes all of it, and the
// search index follows through its delete triggers. Attachment content is
// stored once per hash and has no foreign key (attachment_blobs): the
// company's content goes too unless another company's attachment still
// names it. Stop the company's work first (api's deleteCompany does) and
// call it inside a transaction.
func (s *Store) DeleteCompany(ctx context.Context, q db.Querier, id string) error {
	sums, err := queryAll(ctx, q, "delete company: attachments", func(row rowScanner) (string, error) {
		var sum string
		return sum, row.Scan(&sum)
	}, `SELECT DISTINCT sha256 FROM attachments WHERE company_id = $1`, id)
	if err != nil {
		return err
	}
	// Why the inboxes first: an inbox names its agent, and a conversation
	// its task, ON DELETE RESTRICT (no task or agent goes while its email
	// does), which both databases check per row as the cascade reaches the
	// agent or task; deleting the inboxes first takes their conversations,
	// messages and sends with them.
	if _, err := q.ExecContext(ctx, `DELETE FROM email_endpoints WHERE company_id = $1`, id); err != nil {
		return fmt.Errorf("delete company: inboxes: %w", err)
	}
	res, err := q.ExecContext(ctx, `DELETE FROM companies WHERE id = $1`, id)
	if err != nil {
		return fmt.Errorf("delete company: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return NotFound("delete company")
	}
	for _, sum := range sums {
		if _, err := q.ExecContext(ctx, `DELETE FROM attachment_blobs WHERE sha256 = $1
			AND NOT EXISTS (SELECT 1 FROM attachments WHERE sha256 = $1)`, sum); err != nil {
			return fmt.Errorf("delete company: attachment content: %w", err)
		}
	}
	return nil
}
