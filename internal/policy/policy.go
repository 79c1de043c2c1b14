// Package policy decides whether an actor may perform a named action (for
// example "email.send") under the company's action policies. The default is
// allow; a matching deny wins; allow rules may carry a rate limit.
package policy

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/paperclipai/paperclipai/internal/authz"
	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/store"
)

// Decision is the outcome of Decide.
type Decision struct {
	Allowed bool
	// PolicyID is the deciding policy ("" for the default allow).
	PolicyID string
	// Reason explains a refusal in words safe to show the caller.
	Reason string
	// RateLimited is true when a rate limit refused the action.
	RateLimited bool
	// RetryAfter says when a rate-limited action may be tried again.
	RetryAfter time.Duration
}

// Service evaluates policies.
type Service struct {
	Store *store.Store
}

func actorKind(a authz.Actor) string {
	if a.Kind == authz.KindAgent {
		return "agent"
	}
	return "user"
}

func matches(p domain.ActionPolicy, a authz.Actor) bool {
	if p.ActorKind != "*" && p.ActorKind != actorKind(a) {
		return false
	}
	return p.ActorID == "*" || p.ActorID == a.ID()
}

// Decide evaluates action for the actor inside tx and records the decision
// in the audit log (and, when allowed under a rate limit, the hit), so the
// decision commits or rolls back with the action it guards.
func (s *Service) Decide(ctx context.Context, tx *sql.Tx, companyID string, a authz.Actor, action string) (Decision, error) {
	policies, err := s.Store.ListPolicies(ctx, tx, companyID, action)
	if err != nil {
		return Decision{}, fmt.Errorf("decide %s: %w", action, err)
	}
	d := Decision{Allowed: true}
	var limited []domain.ActionPolicy
	for _, p := range policies {
		if !matches(p, a) {
			continue
		}
		if p.Effect == "deny" {
			d = Decision{Allowed: false, PolicyID: p.ID, Reason: denyReason(p)}
			break
		}
		if p.RateLimitCount > 0 && p.RateLimitWindowSeconds > 0 {
			limited = append(limited, p)
		}
	}
	actorKey := actorKind(a) + ":" + a.ID()
	if d.Allowed {
		now := s.Store.Now()
		for _, p := range limited {
			// Why the lock: two concurrent requests must not both see
			// "limit-1 hits" and both pass on PostgreSQL.
			if err := s.Store.DB.AdvisoryXactLock(ctx, tx, "policy:"+p.ID+":"+actorKey); err != nil {
				return Decision{}, err
			}
			window := time.Duration(p.RateLimitWindowSeconds) * time.Second
			n, oldest, err := s.Store.CountPolicyHits(ctx, tx, p.ID, actorKey, now.Add(-window))
			if err != nil {
				return Decision{}, err
			}
			if n >= p.RateLimitCount {
				retry := oldest.Add(window).Sub(now)
				if retry < time.Second {
					retry = time.Second
				}
				d = Decision{Allowed: false, PolicyID: p.ID, RateLimited: true, RetryAfter: retry,
					Reason: fmt.Sprintf("rate limit for %s reached (%d per %ds)", action, p.RateLimitCount, p.RateLimitWindowSeconds)}
				break
			}
		}
		if d.Allowed {
			for _, p := range limited {
				if err := s.Store.RecordPolicyHit(ctx, tx, p.ID, actorKey); err != nil {
					return Decision{}, err
				}
			}
		}
	}
	return s.audited(ctx, tx, companyID, a, action, d)
}

func denyReason(p domain.ActionPolicy) string {
	if p.Reason != "" {
		return p.Reason
	}
	return "denied by action policy"
}

// Limit applies a built-in rate limit of count actions per window to one
// subject (for example one email thread or one recipient) of action, as an
// action-policy rate limit would: a company policy for action with a rate
// limit overrides the default count and window, a matching deny refuses.
// Allowed uses are recorded in the caller's transaction; every refusal is
// audited.
func (s *Service) Limit(ctx context.Context, tx *sql.Tx, companyID string, a authz.Actor, action, subject string, count int, window time.Duration) (Decision, error) {
	policies, err := s.Store.ListPolicies(ctx, tx, companyID, action)
	if err != nil {
		return Decision{}, fmt.Errorf("limit %s: %w", action, err)
	}
	policyID := ""
	for _, p := range policies {
		if !matches(p, a) {
			continue
		}
		if p.Effect == "deny" {
			return s.audited(ctx, tx, companyID, a, action, Decision{PolicyID: p.ID, Reason: denyReason(p)})
		}
		if p.RateLimitCount > 0 && p.RateLimitWindowSeconds > 0 {
			count, window, policyID = p.RateLimitCount, time.Duration(p.RateLimitWindowSeconds)*time.Second, p.ID
		}
	}
	if count <= 0 || window <= 0 {
		return Decision{Allowed: true, PolicyID: policyID}, nil
	}
	bucket := action + ":" + subject
	// Why the lock: concurrent sends to one thread or recipient must not
	// both see "count-1" and both pass on PostgreSQL.
	if err := s.Store.DB.AdvisoryXactLock(ctx, tx, "rate:"+companyID+":"+bucket); err != nil {
		return Decision{}, err
	}
	now := s.Store.Now()
	n, oldest, err := s.Store.CountRateHits(ctx, tx, companyID, bucket, now.Add(-window))
	if err != nil {
		return Decision{}, err
	}
	if n >= count {
		retry := max(oldest.Add(window).Sub(now), time.Second)
		return s.audited(ctx, tx, companyID, a, action, Decision{PolicyID: policyID, RateLimited: true, RetryAfter: retry,
			Reason: fmt.Sprintf("rate limit for %s reached (%d per %s)", action, count, window)})
	}
	if err := s.Store.RecordRateHit(ctx, tx, companyID, bucket); err != nil {
		return Decision{}, err
	}
	return Decision{Allowed: true, PolicyID: policyID}, nil
}

func (s *Service) audited(ctx context.Context, tx *sql.Tx, companyID string, a authz.Actor, action string, d Decision) (Decision, error) {
	if err := s.Store.Audit(ctx, tx, a.AuditActor(), companyID, "policy.decided", "action", action, map[string]any{"action": action,
		"allowed": d.Allowed, "policyId": d.PolicyID, "reason": d.Reason, "rateLimited": d.RateLimited}); err != nil {
		return Decision{}, err
	}
	return d, nil
}

// Check re-evaluates action for the actor without recording anything: only
// a matching deny refuses. Executors use it to re-check an action that was
// already decided (and counted) when it was accepted.
func (s *Service) Check(ctx context.Context, q db.Querier, companyID string, a authz.Actor, action string) (Decision, error) {
	policies, err := s.Store.ListPolicies(ctx, q, companyID, action)
	if err != nil {
		return Decision{}, fmt.Errorf("check %s: %w", action, err)
	}
	for _, p := range policies {
		if matches(p, a) && p.Effect == "deny" {
			return Decision{PolicyID: p.ID, Reason: denyReason(p)}, nil
		}
	}
	return Decision{Allowed: true}, nil
}
