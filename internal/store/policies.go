package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/domain"
)

const policyCols = `id, company_id, action, actor_kind, actor_id, effect, rate_limit_count, rate_limit_window_seconds, reason, created_at`

func scanPolicy(row rowScanner) (domain.ActionPolicy, error) {
	var p domain.ActionPolicy
	var count, window sql.NullInt64
	err := row.Scan(&p.ID, &p.CompanyID, &p.Action, &p.ActorKind, &p.ActorID, &p.Effect, &count, &window, &p.Reason, &p.CreatedAt)
	p.RateLimitCount, p.RateLimitWindowSeconds = int(count.Int64), int(window.Int64)
	p.CreatedAt = p.CreatedAt.UTC()
	return p, err
}

func nullPositive(v int) any {
	if v <= 0 {
		return nil
	}
	return v
}

// CreatePolicy inserts an action policy.
func (s *Store) CreatePolicy(ctx context.Context, q db.Querier, p *domain.ActionPolicy) error {
	p.ID = NewID()
	p.CreatedAt = s.Now()
	if p.ActorKind == "" {
		p.ActorKind = "*"
	}
	if p.ActorID == "" {
		p.ActorID = "*"
	}
	_, err := q.ExecContext(ctx, `INSERT INTO action_policies (`+policyCols+`) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10)`,
		p.ID, p.CompanyID, p.Action, p.ActorKind, p.ActorID, p.Effect, nullPositive(p.RateLimitCount),
		nullPositive(p.RateLimitWindowSeconds), p.Reason, p.CreatedAt)
	if err != nil {
		return fmt.Errorf("create policy: %w", err)
	}
	return nil
}

// ListPolicies returns a company's action policies; action filters when set.
func (s *Store) ListPolicies(ctx context.Context, q db.Querier, companyID, action string) ([]domain.ActionPolicy, error) {
	if action == "" {
		return queryAll(ctx, q, "list policies", scanPolicy,
			`SELECT `+policyCols+` FROM action_policies WHERE company_id = $1 ORDER BY created_at DESC, id`, companyID)
	}
	return queryAll(ctx, q, "list policies", scanPolicy,
		`SELECT `+policyCols+` FROM action_policies WHERE company_id = $1 AND action = $2 ORDER BY created_at, id`, companyID, action)
}

// ListPoliciesPage returns a page of a company's action policies, newest
// first.
func (s *Store) ListPoliciesPage(ctx context.Context, q db.Querier, companyID string, p Page) ([]domain.ActionPolicy, error) {
	return listPage(ctx, q, "list policies", scanPolicy, `SELECT `+policyCols+` FROM action_policies`, `company_id = $1`,
		[]any{companyID}, "created_at", "id", p)
}

// DeletePolicy removes a company's policy.
func (s *Store) DeletePolicy(ctx context.Context, q db.Querier, companyID, id string) error {
	return execOne(ctx, q, "delete policy", "delete policy", `DELETE FROM action_policies WHERE company_id = $1 AND id = $2`, companyID, id)
}

// CountPolicyHits counts an actor's recorded hits of a rate-limited policy
// since since, and returns the oldest one's time (zero when none).
func (s *Store) CountPolicyHits(ctx context.Context, q db.Querier, policyID, actorKey string, since time.Time) (int, time.Time, error) {
	var n int
	if err := q.QueryRowContext(ctx, `SELECT COUNT(*) FROM action_policy_hits
		WHERE policy_id = $1 AND actor_key = $2 AND created_at > $3`, policyID, actorKey, since.UTC()).Scan(&n); err != nil {
		return 0, time.Time{}, fmt.Errorf("count policy hits: %w", err)
	}
	if n == 0 {
		return 0, time.Time{}, nil
	}
	// Not MIN(created_at): SQLite aggregates drop the column's declared
	// type, so the driver would hand back text instead of a time.
	var oldest time.Time
	if err := q.QueryRowContext(ctx, `SELECT created_at FROM action_policy_hits
		WHERE policy_id = $1 AND actor_key = $2 AND created_at > $3 ORDER BY created_at LIMIT 1`,
		policyID, actorKey, since.UTC()).Scan(&oldest); err != nil {
		return 0, time.Time{}, fmt.Errorf("oldest policy hit: %w", err)
	}
	return n, oldest.UTC(), nil
}

// RecordPolicyHit records one allowed use of a rate-limited policy.
func (s *Store) RecordPolicyHit(ctx context.Context, q db.Querier, policyID, actorKey string) error {
	_, err := q.ExecContext(ctx, `INSERT INTO action_policy_hits (policy_id, actor_key, created_at) VALUES ($1, $2, $3)`,
		policyID, actorKey, s.Now())
	if err != nil {
		return fmt.Errorf("record policy hit: %w", err)
	}
	return nil
}

// CountRateHits counts a bucket's hits after since and returns the oldest.
func (s *Store) CountRateHits(ctx context.Context, q db.Querier, companyID, bucket string, since time.Time) (int, time.Time, error) {
	var n int
	if err := q.QueryRowContext(ctx, `SELECT COUNT(*) FROM action_rate_hits WHERE company_id = $1 AND bucket = $2 AND created_at > $3`,
		companyID, bucket, since.UTC()).Scan(&n); err != nil {
		return 0, time.Time{}, fmt.Errorf("count rate hits: %w", err)
	}
	if n == 0 {
		return 0, time.Time{}, nil
	}
	var oldest time.Time
	if err := q.QueryRowContext(ctx, `SELECT created_at FROM action_rate_hits WHERE company_id = $1 AND bucket = $2 AND created_at > $3
		ORDER BY created_at LIMIT 1`, companyID, bucket, since.UTC()).Scan(&oldest); err != nil {
		return 0, time.Time{}, fmt.Errorf("oldest rate hit: %w", err)
	}
	return n, oldest.UTC(), nil
}

// RecordRateHit records one use of a rate-limited bucket.
func (s *Store) RecordRateHit(ctx context.Context, q db.Querier, companyID, bucket string) error {
	if _, err := q.ExecContext(ctx, `INSERT INTO action_rate_hits (company_id, bucket, created_at) VALUES ($1, $2, $3)`,
		companyID, bucket, s.Now()); err != nil {
		return fmt.Errorf("record rate hit: %w", err)
	}
	return nil
}
