package retention

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Job runs the purge daily: the database part on one replica a day (a
// row of maintenance_leases is the lease, and records when it was last
// done), the task directories of this replica's home on every replica.
type Job struct {
	Service *Service
	// Holder names this process in the lease (the runner id).
	Holder string
	Log    *slog.Logger
	// Every is how often the job looks whether a purge is due (default
	// one hour); the purge itself runs once per day.
	Every time.Duration

	cancel   context.CancelFunc
	done     chan struct{}
	mu       sync.Mutex
	lastDirs time.Time
}

const (
	leaseName = "retention"
	day       = 24 * time.Hour
)

// Start begins the schedule; ctx bounds only the start.
func (j *Job) Start(ctx context.Context) error {
	ctx, j.cancel = context.WithCancel(context.WithoutCancel(ctx))
	j.done = make(chan struct{})
	every := j.Every
	if every <= 0 {
		every = time.Hour
	}
	go func() {
		defer close(j.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			if _, err := j.RunDue(ctx); err != nil && ctx.Err() == nil {
				j.Log.Warn("retention purge", "err", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return nil
}

// Shutdown stops the schedule and waits for a purge in progress.
func (j *Job) Shutdown(ctx context.Context) error {
	if j.cancel == nil {
		return nil
	}
	j.cancel()
	select {
	case <-j.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("retention: shutdown: %w", ctx.Err())
	}
}

// RunDue purges what is due now and returns the total freed: the
// database part when no replica did it in the last day (and no other
// holds the lease), this replica's task directories when it did not
// purge them in the last day.
func (j *Job) RunDue(ctx context.Context) (Report, error) {
	var total Report
	st := j.Service.Store
	now := st.Now()
	companies, err := j.companies(ctx)
	if err != nil {
		return total, err
	}
	claimed, err := j.claim(ctx, now)
	if err != nil {
		return total, err
	}
	if claimed {
		for _, c := range companies {
			r, err := j.Service.PurgeDatabase(ctx, c, now)
			if err != nil {
				return total, fmt.Errorf("purge company %s: %w", c, err)
			}
			add(&total, r)
			if !r.Empty() {
				j.Log.Info("retention purged", "company", c, "emailMessages", r.EmailMessages, "emailBytes", r.EmailBytes,
					"attachments", r.Attachments, "attachmentBytes", r.AttachmentBytes, "runLogs", r.RunLogs, "runLogBytes", r.RunLogBytes)
			}
		}
		// Done: the lease ends now and the day starts from here.
		if _, err := st.DB.ExecContext(ctx, `UPDATE maintenance_leases SET last_done_at = $1, expires_at = $1, holder = ''
			WHERE name = $2 AND holder = $3`, st.Now(), leaseName, j.Holder); err != nil {
			return total, fmt.Errorf("retention lease: %w", err)
		}
	}
	j.mu.Lock()
	dirsDue := now.Sub(j.lastDirs) >= day
	if dirsDue {
		j.lastDirs = now
	}
	j.mu.Unlock()
	if dirsDue {
		for _, c := range companies {
			r, err := j.Service.PurgeTaskDirs(ctx, c, now)
			if err != nil {
				return total, fmt.Errorf("purge task directories of %s: %w", c, err)
			}
			add(&total, r)
			if !r.Empty() {
				j.Log.Info("retention purged task directories", "company", c, "taskDirs", r.TaskDirs, "taskDirBytes", r.TaskDirBytes)
			}
		}
	}
	return total, nil
}

// claim takes the daily lease when the purge is due and no live holder
// has it. One conditional UPDATE decides: on PostgreSQL concurrent
// replicas serialize on the row, and only one sees its condition true.
func (j *Job) claim(ctx context.Context, now time.Time) (bool, error) {
	d := j.Service.Store.DB
	if _, err := d.ExecContext(ctx, `INSERT INTO maintenance_leases (name, holder, expires_at) VALUES ($1, '', $2)
		ON CONFLICT (name) DO NOTHING`, leaseName, now.Add(-time.Second)); err != nil {
		return false, fmt.Errorf("retention lease: %w", err)
	}
	res, err := d.ExecContext(ctx, `UPDATE maintenance_leases SET holder = $1, expires_at = $2
		WHERE name = $3 AND expires_at < $4 AND (last_done_at IS NULL OR last_done_at < $5)`,
		j.Holder, now.Add(time.Hour), leaseName, now, now.Add(-day))
	if err != nil {
		return false, fmt.Errorf("retention lease: %w", err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

func (j *Job) companies(ctx context.Context) ([]string, error) {
	rows, err := j.Service.Store.DB.QueryContext(ctx, `SELECT company_id FROM retention_settings
		WHERE email_days IS NOT NULL OR run_log_days IS NOT NULL OR task_dir_days IS NOT NULL ORDER BY company_id`)
	if err != nil {
		return nil, fmt.Errorf("retention companies: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	return out, rows.Err()
}

func add(t *Report, r Report) {
	t.EmailMessages += r.EmailMessages
	t.EmailBytes += r.EmailBytes
	t.Attachments += r.Attachments
	t.AttachmentBytes += r.AttachmentBytes
	t.RunLogs += r.RunLogs
	t.RunLogBytes += r.RunLogBytes
	t.TaskDirs += r.TaskDirs
	t.TaskDirBytes += r.TaskDirBytes
}
