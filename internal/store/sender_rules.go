package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/paperclipai/paperclipai/internal/db"
)

// Sync states of an inbox's sender rules (email_sender_rules.sync_state).
const (
	RulesPending = "pending"
	RulesSynced  = "synced"
	RulesFailed  = "failed"
)

// SenderRules is an inbox's receive/reply allow and block lists as
// Paperclip manages them, with the state of their sync to AgentMail
// (table email_sender_rules). Rules is the JSON document of the lists.
type SenderRules struct {
	EndpointID     string
	CompanyID      string
	Rules          string
	Version        int64
	SyncedVersion  int64
	SyncState      string
	SyncError      string
	SyncAttempts   int
	NextSyncAt     *time.Time
	LastSyncedAt   *time.Time
	Drift          string
	DriftCheckedAt *time.Time
	UpdatedAt      time.Time
}

const senderRuleCols = `endpoint_id, company_id, rules, version, synced_version, sync_state, sync_error, sync_attempts,
	next_sync_at, last_synced_at, drift, drift_checked_at, updated_at`

func scanSenderRules(row rowScanner) (SenderRules, error) {
	var r SenderRules
	var syncErr, drift sql.NullString
	var next, last, checked sql.NullTime
	if err := row.Scan(&r.EndpointID, &r.CompanyID, &r.Rules, &r.Version, &r.SyncedVersion, &r.SyncState, &syncErr,
		&r.SyncAttempts, &next, &last, &drift, &checked, &r.UpdatedAt); err != nil {
		return r, err
	}
	r.SyncError, r.Drift = syncErr.String, drift.String
	r.NextSyncAt, r.LastSyncedAt, r.DriftCheckedAt = timePtr(next), timePtr(last), timePtr(checked)
	r.UpdatedAt = r.UpdatedAt.UTC()
	return r, nil
}

// GetSenderRules returns an inbox's sender rules, or ErrNotFound when none
// were ever set.
func (s *Store) GetSenderRules(ctx context.Context, q db.Querier, endpointID string) (SenderRules, error) {
	r, err := scanSenderRules(q.QueryRowContext(ctx, `SELECT `+senderRuleCols+` FROM email_sender_rules WHERE endpoint_id = $1`, endpointID))
	if errors.Is(err, sql.ErrNoRows) {
		return r, ErrNotFound
	}
	if err != nil {
		return r, fmt.Errorf("get sender rules: %w", err)
	}
	return r, nil
}

// PutSenderRules stores new rules for an inbox and marks them pending
// sync (due now); the version grows by one. It returns the new version.
func (s *Store) PutSenderRules(ctx context.Context, q db.Querier, companyID, endpointID, rules string) (int64, error) {
	now := s.Now()
	var v int64
	// One upsert: two concurrent writers each get their own version, and
	// the sync of the older one can never mark the newer one synced.
	err := q.QueryRowContext(ctx, `INSERT INTO email_sender_rules (endpoint_id, company_id, rules, version, sync_state, next_sync_at, updated_at)
		VALUES ($1, $2, $3, 1, 'pending', $4, $4)
		ON CONFLICT (endpoint_id) DO UPDATE SET rules = excluded.rules, version = email_sender_rules.version + 1,
			sync_state = 'pending', sync_attempts = 0, next_sync_at = excluded.next_sync_at, updated_at = excluded.updated_at
		RETURNING version`, endpointID, companyID, rules, now).Scan(&v)
	if err != nil {
		return 0, fmt.Errorf("put sender rules: %w", err)
	}
	return v, nil
}

// DueSenderRules returns up to limit inboxes whose rules wait for a sync
// (pending or failed, due by now).
func (s *Store) DueSenderRules(ctx context.Context, q db.Querier, limit int) ([]SenderRules, error) {
	return queryAll(ctx, q, "due sender rules", scanSenderRules, `SELECT `+senderRuleCols+` FROM email_sender_rules
		WHERE sync_state IN ('pending', 'failed') AND (next_sync_at IS NULL OR next_sync_at <= $1)
		ORDER BY next_sync_at LIMIT $2`, s.Now(), limit)
}

// NextSenderRulesRetry returns when the earliest failed or pending sync
// that is not yet due falls due (nil when none waits): the rules worker
// sleeps until then instead of polling.
func (s *Store) NextSenderRulesRetry(ctx context.Context, q db.Querier) (*time.Time, error) {
	rows, err := queryAll(ctx, q, "next sender rules retry", scanSenderRules, `SELECT `+senderRuleCols+` FROM email_sender_rules
		WHERE sync_state IN ('pending', 'failed') AND next_sync_at > $1
		ORDER BY next_sync_at LIMIT 1`, s.Now())
	if err != nil || len(rows) == 0 {
		return nil, err
	}
	return rows[0].NextSyncAt, nil
}

// MarkSenderRulesSynced records that version was written to AgentMail. A
// newer version stored meanwhile stays pending (the update matches only
// the synced version).
func (s *Store) MarkSenderRulesSynced(ctx context.Context, q db.Querier, endpointID string, version int64) error {
	now := s.Now()
	if _, err := q.ExecContext(ctx, `UPDATE email_sender_rules SET synced_version = $2, last_synced_at = $3,
		sync_state = CASE WHEN version = $2 THEN 'synced' ELSE sync_state END,
		sync_error = CASE WHEN version = $2 THEN NULL ELSE sync_error END,
		sync_attempts = CASE WHEN version = $2 THEN 0 ELSE sync_attempts END,
		next_sync_at = CASE WHEN version = $2 THEN NULL ELSE next_sync_at END,
		drift = CASE WHEN version = $2 THEN NULL ELSE drift END
		WHERE endpoint_id = $1`, endpointID, version, now); err != nil {
		return fmt.Errorf("mark sender rules synced: %w", err)
	}
	return nil
}

// MarkSenderRulesFailed records a failed sync of version (its redacted
// error) and when to try again; a newer version stays pending.
func (s *Store) MarkSenderRulesFailed(ctx context.Context, q db.Querier, endpointID string, version int64, redacted string, next time.Time) error {
	if _, err := q.ExecContext(ctx, `UPDATE email_sender_rules SET sync_state = 'failed', sync_error = $3,
		sync_attempts = sync_attempts + 1, next_sync_at = $4
		WHERE endpoint_id = $1 AND version = $2`, endpointID, version, redacted, next.UTC()); err != nil {
		return fmt.Errorf("mark sender rules failed: %w", err)
	}
	return nil
}

// SetSenderRulesDrift records the result of a drift check: AgentMail's
// entries when they differ from ours ("" when they agree).
func (s *Store) SetSenderRulesDrift(ctx context.Context, q db.Querier, endpointID, drift string) error {
	if _, err := q.ExecContext(ctx, `UPDATE email_sender_rules SET drift = $2, drift_checked_at = $3 WHERE endpoint_id = $1`,
		endpointID, nullString(drift), s.Now()); err != nil {
		return fmt.Errorf("record sender rules drift: %w", err)
	}
	return nil
}

// SenderRulesToCheck returns up to limit synced rules whose last drift
// check is older than before (or never ran).
func (s *Store) SenderRulesToCheck(ctx context.Context, q db.Querier, before time.Time, limit int) ([]SenderRules, error) {
	return queryAll(ctx, q, "sender rules to check", scanSenderRules, `SELECT `+senderRuleCols+` FROM email_sender_rules
		WHERE sync_state = 'synced' AND (drift_checked_at IS NULL OR drift_checked_at < $1)
		ORDER BY drift_checked_at LIMIT $2`, before.UTC(), limit)
}
