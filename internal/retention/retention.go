// Package retention purges what a company chose not to keep for ever:
// retained email content and attachments, run logs, and the private
// directories of tasks done long ago. Tasks, comments, runs and the
// message rows themselves (addressing, times) stay; every purge leaves an
// audit line saying what it freed. Without settings nothing is purged.
package retention

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/heartbeat"
	"github.com/paperclipai/paperclipai/internal/store"
)

// Settings are a company's retention limits in days; nil keeps for ever.
type Settings struct {
	EmailDays   *int `json:"emailDays"`
	RunLogDays  *int `json:"runLogDays"`
	TaskDirDays *int `json:"taskDirDays"`
}

// Validate checks every limit is a positive number of days (at most 100
// years).
func (s Settings) Validate() error {
	for name, v := range map[string]*int{"emailDays": s.EmailDays, "runLogDays": s.RunLogDays, "taskDirDays": s.TaskDirDays} {
		if v != nil && (*v < 1 || *v > 36500) {
			return fmt.Errorf("%s must be between 1 and 36500 days, or null to keep for ever", name)
		}
	}
	return nil
}

// Report says what one purge freed.
type Report struct {
	EmailMessages   int   `json:"emailMessages"`
	EmailBytes      int64 `json:"emailBytes"`
	Attachments     int   `json:"attachments"`
	AttachmentBytes int64 `json:"attachmentBytes"`
	RunLogs         int   `json:"runLogs"`
	RunLogBytes     int64 `json:"runLogBytes"`
	TaskDirs        int   `json:"taskDirs"`
	TaskDirBytes    int64 `json:"taskDirBytes"`
	// Subjects, Sends and Quarantined count, for purge-sender, the
	// messages whose subject and names it removed (EmailMessages counts
	// those whose content it removed: a message the retention purge
	// emptied still had a subject), the finished sends whose text it
	// removed and the quarantined messages it blanked.
	Subjects    int `json:"subjects,omitempty"`
	Sends       int `json:"sends,omitempty"`
	Quarantined int `json:"quarantined,omitempty"`
}

// Empty reports whether nothing was freed.
func (r Report) Empty() bool {
	return r.EmailMessages+r.Attachments+r.RunLogs+r.TaskDirs+r.Subjects+r.Sends+r.Quarantined == 0
}

// Usage is the space each kind of retained data takes now.
type Usage struct {
	EmailBytes      int64 `json:"emailBytes"`
	AttachmentBytes int64 `json:"attachmentBytes"`
	RunLogBytes     int64 `json:"runLogBytes"`
	// TaskDirBytes counts the task directories in this replica's home.
	TaskDirBytes int64 `json:"taskDirBytes"`
}

// Service reads and applies retention.
type Service struct {
	Store *store.Store
	// WorkspacesDir holds <companyId>/<taskId> task directories (config
	// WorkspacesDir); empty skips them.
	WorkspacesDir string
}

func (s *Service) db() *db.DB { return s.Store.DB }

// Get returns a company's settings (all nil when never set).
func (s *Service) Get(ctx context.Context, companyID string) (Settings, error) {
	var e, r, t sql.NullInt64
	err := s.db().QueryRowContext(ctx, `SELECT email_days, run_log_days, task_dir_days FROM retention_settings WHERE company_id = $1`, companyID).
		Scan(&e, &r, &t)
	if errors.Is(err, sql.ErrNoRows) {
		return Settings{}, nil
	}
	if err != nil {
		return Settings{}, fmt.Errorf("retention settings: %w", err)
	}
	return Settings{EmailDays: nullInt(e), RunLogDays: nullInt(r), TaskDirDays: nullInt(t)}, nil
}

func nullInt(v sql.NullInt64) *int {
	if !v.Valid {
		return nil
	}
	n := int(v.Int64)
	return &n
}

func argInt(v *int) any {
	if v == nil {
		return nil
	}
	return *v
}

// Put replaces a company's settings and records who changed them.
func (s *Service) Put(ctx context.Context, companyID string, set Settings, actor domain.ActivityActor) error {
	if err := set.Validate(); err != nil {
		return err
	}
	return s.Store.Tx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO retention_settings (company_id, email_days, run_log_days, task_dir_days, updated_at)
			VALUES ($1, $2, $3, $4, $5) ON CONFLICT (company_id) DO UPDATE SET email_days = excluded.email_days,
			run_log_days = excluded.run_log_days, task_dir_days = excluded.task_dir_days, updated_at = excluded.updated_at`,
			companyID, argInt(set.EmailDays), argInt(set.RunLogDays), argInt(set.TaskDirDays), s.Store.Now())
		if err != nil {
			return fmt.Errorf("save retention settings: %w", err)
		}
		details, _ := json.Marshal(set)
		return s.Store.InsertActivity(ctx, tx, &domain.Activity{CompanyID: companyID, ActorKind: actor.Kind, ActorID: actor.ID,
			AgentID: actor.AgentID, Action: "retention.updated", EntityType: "company", EntityID: companyID, Details: details})
	})
}

// Usage measures what a company keeps now.
func (s *Service) Usage(ctx context.Context, companyID string) (Usage, error) {
	var u Usage
	err := s.db().QueryRowContext(ctx, `SELECT COALESCE(SUM(LENGTH(text) + LENGTH(full_text) + COALESCE(LENGTH(CAST(headers AS TEXT)), 0)), 0)
		FROM email_messages WHERE company_id = $1`, companyID).Scan(&u.EmailBytes)
	if err != nil {
		return u, fmt.Errorf("email usage: %w", err)
	}
	ids, err := s.emailAttachmentIDs(ctx, s.db(), `company_id = $1`, companyID)
	if err != nil {
		return u, err
	}
	if u.AttachmentBytes, err = s.attachmentBytes(ctx, s.db(), ids); err != nil {
		return u, err
	}
	if err := s.db().QueryRowContext(ctx, `SELECT COALESCE(SUM(l.size_bytes), 0) FROM heartbeat_run_logs l
		JOIN heartbeat_runs r ON r.id = l.run_id WHERE r.company_id = $1`, companyID).Scan(&u.RunLogBytes); err != nil {
		return u, fmt.Errorf("run log usage: %w", err)
	}
	if s.WorkspacesDir != "" && store.ValidID(companyID) {
		for _, dir := range s.companyDirs(companyID) {
			u.TaskDirBytes += dirSize(dir)
		}
	}
	return u, nil
}

// emailAttachmentIDs returns the attachment ids of the messages matching
// where (with args).
func (s *Service) emailAttachmentIDs(ctx context.Context, q db.Querier, where string, args ...any) ([]string, error) {
	rows, err := q.QueryContext(ctx, `SELECT attachment_ids FROM email_messages WHERE `+where, args...)
	if err != nil {
		return nil, fmt.Errorf("email attachments: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var raw []byte
		if err := rows.Scan(&raw); err != nil {
			return nil, err
		}
		var ids []string
		_ = json.Unmarshal(raw, &ids)
		out = append(out, ids...)
	}
	return out, rows.Err()
}

func (s *Service) attachmentBytes(ctx context.Context, q db.Querier, ids []string) (int64, error) {
	var total int64
	for _, id := range ids {
		var n int64
		err := q.QueryRowContext(ctx, `SELECT size_bytes FROM attachments WHERE id = $1`, id).Scan(&n)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("attachment size: %w", err)
		}
		total += n
	}
	return total, nil
}

// Purge applies a company's settings as of now and audits what it freed.
// The database part and the task directories of this replica's home are
// separate: PurgeDatabase runs on one replica a day, PurgeTaskDirs on each.
func (s *Service) PurgeDatabase(ctx context.Context, companyID string, now time.Time) (Report, error) {
	var r Report
	set, err := s.Get(ctx, companyID)
	if err != nil {
		return r, err
	}
	if set.EmailDays != nil {
		cutoff := now.AddDate(0, 0, -*set.EmailDays)
		err := s.Store.Tx(ctx, func(tx *sql.Tx) error {
			return s.purgeMessages(ctx, tx, &r, `company_id = $1 AND created_at < $2 AND content_purged_at IS NULL`, companyID, cutoff)
		})
		if err != nil {
			return r, err
		}
		// The provider events the messages were made from hold the same
		// content; done ones are only kept for deduplication.
		if _, err := s.db().ExecContext(ctx, `UPDATE email_deliveries SET normalized_event = '{}'
			WHERE company_id = $1 AND received_at < $2 AND state IN ('processed', 'filtered', 'failed') AND CAST(normalized_event AS TEXT) <> '{}'`,
			companyID, cutoff); err != nil {
			return r, fmt.Errorf("purge delivery events: %w", err)
		}
	}
	if set.RunLogDays != nil {
		cutoff := now.AddDate(0, 0, -*set.RunLogDays)
		err := s.Store.Tx(ctx, func(tx *sql.Tx) error {
			sub := `SELECT id FROM heartbeat_runs WHERE company_id = $1 AND finished_at IS NOT NULL AND finished_at < $2`
			if err := tx.QueryRowContext(ctx, `SELECT COUNT(*), COALESCE(SUM(size_bytes), 0) FROM heartbeat_run_logs
				WHERE size_bytes > 0 AND run_id IN (`+sub+`)`, companyID, cutoff).Scan(&r.RunLogs, &r.RunLogBytes); err != nil {
				return fmt.Errorf("measure run logs: %w", err)
			}
			_, err := tx.ExecContext(ctx, `UPDATE heartbeat_run_logs SET content = '', size_bytes = 0
				WHERE size_bytes > 0 AND run_id IN (`+sub+`)`, companyID, cutoff)
			if err != nil {
				return fmt.Errorf("purge run logs: %w", err)
			}
			return nil
		})
		if err != nil {
			return r, err
		}
	}
	return r, s.audit(ctx, companyID, "retention.purged", r, nil)
}

// purgeMessages blanks the content of the messages matching where (text,
// full text, headers), deletes their attachments (and blobs no other
// attachment shares) and marks them purged, counting into r.
func (s *Service) purgeMessages(ctx context.Context, tx *sql.Tx, r *Report, where string, args ...any) error {
	var n int
	var bytes int64
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*), COALESCE(SUM(LENGTH(text) + LENGTH(full_text) + COALESCE(LENGTH(CAST(headers AS TEXT)), 0)), 0)
		FROM email_messages WHERE `+where, args...).Scan(&n, &bytes); err != nil {
		return fmt.Errorf("measure email content: %w", err)
	}
	if n == 0 {
		return nil
	}
	ids, err := s.emailAttachmentIDs(ctx, tx, where, args...)
	if err != nil {
		return err
	}
	for _, id := range ids {
		var sum string
		var size int64
		err := tx.QueryRowContext(ctx, `SELECT sha256, size_bytes FROM attachments WHERE id = $1`, id).Scan(&sum, &size)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return fmt.Errorf("purge attachment: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM attachments WHERE id = $1`, id); err != nil {
			return fmt.Errorf("purge attachment: %w", err)
		}
		// Content is stored once per hash: drop it only when no other
		// attachment (another company's too) still refers to it.
		if _, err := tx.ExecContext(ctx, `DELETE FROM attachment_blobs WHERE sha256 = $1
			AND NOT EXISTS (SELECT 1 FROM attachments WHERE sha256 = $1)`, sum); err != nil {
			return fmt.Errorf("purge attachment content: %w", err)
		}
		r.Attachments++
		r.AttachmentBytes += size
	}
	// SQLite's search index keeps its own copy of the text (PostgreSQL's
	// search_vector is recomputed by the row's trigger).
	if s.db().Dialect == db.SQLite {
		if _, err := tx.ExecContext(ctx, `UPDATE search_fts SET body = '', attachments = ''
			WHERE rowid IN (SELECT rid FROM search_docs WHERE doc_id IN (SELECT id FROM email_messages WHERE `+where+`))`, args...); err != nil {
			return fmt.Errorf("purge email search text: %w", err)
		}
	}
	// The where clause's placeholders are $1…$n; the time is bound last.
	mark := fmt.Sprintf("$%d", len(args)+1)
	if _, err := tx.ExecContext(ctx, `UPDATE email_messages SET text = '', full_text = '', headers = NULL, attachment_ids = '[]',
		content_purged_at = `+mark+` WHERE `+where, append(args, s.Store.Now())...); err != nil {
		return fmt.Errorf("purge email content: %w", err)
	}
	r.EmailMessages += n
	r.EmailBytes += bytes
	return nil
}

// taskDirs are the places a task's private directory can be: the sandbox
// and the host tree (sandboxed and host runs never share a directory, see
// heartbeat.TaskDirectory), and the layout of homes from before that split.
func (s *Service) taskDirs(companyID, taskID string) []string {
	return []string{
		heartbeat.TaskDirectory(s.WorkspacesDir, companyID, taskID, true),
		heartbeat.TaskDirectory(s.WorkspacesDir, companyID, taskID, false),
		filepath.Join(s.WorkspacesDir, companyID, taskID),
	}
}

// companyDirs are the directories that hold a company's task directories
// (taskDirs' parents).
func (s *Service) companyDirs(companyID string) []string {
	var out []string
	for _, d := range s.taskDirs(companyID, "x") {
		out = append(out, filepath.Dir(d))
	}
	return out
}

// PurgeTaskDirs removes the private directories, in this replica's home,
// of the company's tasks done for longer than its setting.
func (s *Service) PurgeTaskDirs(ctx context.Context, companyID string, now time.Time) (Report, error) {
	var r Report
	set, err := s.Get(ctx, companyID)
	if err != nil || set.TaskDirDays == nil || s.WorkspacesDir == "" || !store.ValidID(companyID) {
		return r, err
	}
	cutoff := now.AddDate(0, 0, -*set.TaskDirDays)
	rows, err := s.db().QueryContext(ctx, `SELECT id FROM issues WHERE company_id = $1 AND status = 'done'
		AND completed_at IS NOT NULL AND completed_at < $2`, companyID, cutoff)
	if err != nil {
		return r, fmt.Errorf("done tasks: %w", err)
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return r, err
		}
		ids = append(ids, id)
	}
	rows.Close()
	for _, id := range ids {
		if !store.ValidID(id) {
			continue
		}
		for _, dir := range s.taskDirs(companyID, id) {
			if _, err := os.Lstat(dir); err != nil {
				continue
			}
			size := dirSize(dir)
			if err := os.RemoveAll(dir); err != nil {
				return r, fmt.Errorf("remove task directory %s: %w", id, err)
			}
			r.TaskDirs++
			r.TaskDirBytes += size
		}
	}
	return r, s.audit(ctx, companyID, "retention.purged", r, nil)
}

// audit records a purge that freed something.
func (s *Service) audit(ctx context.Context, companyID, action string, r Report, extra map[string]any) error {
	if r.Empty() && extra == nil {
		return nil
	}
	d := map[string]any{"freed": r}
	for k, v := range extra {
		d[k] = v
	}
	details, _ := json.Marshal(d)
	return s.Store.InsertActivity(ctx, s.db(), &domain.Activity{CompanyID: companyID, ActorKind: "system", ActorID: "retention",
		Action: action, EntityType: "company", EntityID: companyID, Details: details})
}

// dirSize is the total size of the regular files under dir (symlinks are
// not followed).
func dirSize(dir string) int64 {
	var total int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				total += info.Size()
			}
		}
		return nil
	})
	return total
}
