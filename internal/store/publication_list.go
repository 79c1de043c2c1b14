package store

import (
	"context"
	"time"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/domain"
)

// PublicationCursor is where a newest-first listing of sends continues:
// after the send with this creation time and id.
type PublicationCursor struct {
	CreatedAt time.Time
	ID        string
}

// ListedPublication is a send with the title of its task.
type ListedPublication struct {
	EmailPublication
	IssueTitle string
}

// ListCompanyPublications returns up to limit of a company's sends,
// newest first, with an outcome of outcome ("" for any), after cursor
// (nil: from the newest).
func (s *Store) ListCompanyPublications(ctx context.Context, q db.Querier, companyID string, outcome domain.SendOutcome,
	after *PublicationCursor, limit int) ([]ListedPublication, error) {
	args := []any{companyID, string(outcome), limit}
	page := ""
	if after != nil {
		// Keyset pagination on (created_at, id): stable while new sends
		// arrive, unlike an offset.
		page = ` AND (p.created_at < $4 OR (p.created_at = $4 AND p.id < $5))`
		args = append(args, after.CreatedAt.UTC(), after.ID)
	}
	return queryAll(ctx, q, "list email deliveries", func(row rowScanner) (ListedPublication, error) {
		var lp ListedPublication
		p, err := scanPublication(extraScanner{row, []any{&lp.IssueTitle}})
		lp.EmailPublication = p
		return lp, err
	}, `SELECT `+pubCols+`, i.title`+pubFrom+` JOIN issues i ON i.id = p.issue_id
		WHERE p.company_id = $1 AND ($2 = '' OR s.outcome = $2)`+page+`
		ORDER BY p.created_at DESC, p.id DESC LIMIT $3`, args...)
}

// extraScanner scans a row whose last columns go to extra, after those
// its caller's scan function knows.
type extraScanner struct {
	row   rowScanner
	extra []any
}

// Scan implements rowScanner.
func (e extraScanner) Scan(dest ...any) error { return e.row.Scan(append(dest, e.extra...)...) }
