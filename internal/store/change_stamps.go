package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"

	"github.com/paperclipai/paperclipai/internal/db"
)

// ChangeStamps are opaque fingerprints of what a company's live views
// show: each changes when its kind of data changes (the web UI's event
// stream compares them to push region refreshes).
type ChangeStamps struct {
	Tasks         string `json:"tasks"`
	Runs          string `json:"runs"`
	Conversations string `json:"conversations"`
}

// CompanyChangeStamps reads the company's change fingerprints in one
// query: counts and newest change times, most through the company-first
// indexes. Tasks include the activity log (comments, attachments and
// every other audited change touch it); conversations include their sends.
func (s *Store) CompanyChangeStamps(ctx context.Context, q db.Querier, companyID string) (ChangeStamps, error) {
	var v [8]sql.NullString
	err := q.QueryRowContext(ctx, `SELECT
		(SELECT COUNT(*) FROM issues WHERE company_id = $1), (SELECT MAX(updated_at) FROM issues WHERE company_id = $1),
		(SELECT MAX(created_at) FROM activity_log WHERE company_id = $1),
		(SELECT COUNT(*) FROM heartbeat_runs WHERE company_id = $1), (SELECT MAX(updated_at) FROM heartbeat_runs WHERE company_id = $1),
		(SELECT MAX(last_activity_at) FROM email_conversations WHERE company_id = $1),
		(SELECT COUNT(*) FROM email_messages WHERE company_id = $1), (SELECT MAX(updated_at) FROM email_sends WHERE company_id = $1)`,
		companyID).Scan(&v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7])
	if err != nil {
		return ChangeStamps{}, fmt.Errorf("read change stamps: %w", err)
	}
	stamp := func(parts ...sql.NullString) string {
		h := sha256.New()
		for _, p := range parts {
			fmt.Fprintf(h, "%t:%s|", p.Valid, p.String)
		}
		return hex.EncodeToString(h.Sum(nil))[:16]
	}
	return ChangeStamps{Tasks: stamp(v[0], v[1], v[2]), Runs: stamp(v[3], v[4]), Conversations: stamp(v[5], v[6], v[7])}, nil
}
