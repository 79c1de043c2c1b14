package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/domain"
)

const endpointCols = `id, company_id, public_id, assigned_agent_id, sponsor_user_id, credential_connection_id, status, address,
	display_name, provider_account_id, receive_mode, webhook_id, owned_api_key_id, activation_at, sync_checkpoint, last_sync_at,
	health_message, last_error, last_event_at, last_publication_at, activated_at, archived_at, created_at, updated_at`

func scanEndpoint(row rowScanner) (domain.EmailEndpoint, error) {
	var es endpointScan
	if err := row.Scan(es.dests()...); err != nil {
		return domain.EmailEndpoint{}, err
	}
	return es.endpoint(), nil
}

// endpointScan receives the endpointCols of one row, for scanEndpoint and
// for queries that select more columns after them.
type endpointScan struct {
	e                                                    domain.EmailEndpoint
	sponsor, cred, addr, acct, webhook, owned, lastErr   sql.NullString
	activation, checkpoint, lastSync, lastEvent, lastPub sql.NullTime
	activated, archived                                  sql.NullTime
}

// dests are the scan destinations of endpointCols, in order.
func (es *endpointScan) dests() []any {
	e := &es.e
	return []any{&e.ID, &e.CompanyID, &e.PublicID, &e.AssignedAgentID, &es.sponsor, &es.cred, &e.Status, &es.addr,
		&e.DisplayName, &es.acct, &e.ReceiveMode, &es.webhook, &es.owned, &es.activation, &es.checkpoint, &es.lastSync,
		&e.HealthMessage, &es.lastErr, &es.lastEvent, &es.lastPub, &es.activated, &es.archived, &e.CreatedAt, &e.UpdatedAt}
}

// endpoint is the scanned row.
func (es *endpointScan) endpoint() domain.EmailEndpoint {
	e := es.e
	e.SponsorUserID, e.CredentialConnectionID, e.Address = es.sponsor.String, es.cred.String, es.addr.String
	e.ProviderAccountID, e.WebhookID, e.OwnedAPIKeyID, e.LastError = es.acct.String, es.webhook.String, es.owned.String, es.lastErr.String
	e.ActivationAt, e.SyncCheckpoint, e.LastSyncAt = timePtr(es.activation), timePtr(es.checkpoint), timePtr(es.lastSync)
	e.LastEventAt, e.LastPublicationAt = timePtr(es.lastEvent), timePtr(es.lastPub)
	e.ActivatedAt, e.ArchivedAt = timePtr(es.activated), timePtr(es.archived)
	e.CreatedAt, e.UpdatedAt = e.CreatedAt.UTC(), e.UpdatedAt.UTC()
	return e
}

// InsertEndpoint inserts a draft endpoint whose id is the setup request id.
// It reports created=false when a row with that id already exists.
func (s *Store) InsertEndpoint(ctx context.Context, q db.Querier, e *domain.EmailEndpoint) (bool, error) {
	e.CreatedAt = s.Now()
	e.UpdatedAt = e.CreatedAt
	e.PublicID = NewID()
	if e.Status == "" {
		e.Status = domain.EndpointDraft
	}
	res, err := q.ExecContext(ctx, `INSERT INTO email_endpoints (id, company_id, public_id, assigned_agent_id, sponsor_user_id,
		status, display_name, receive_mode, created_at, updated_at) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$9)
		ON CONFLICT (id) DO NOTHING`, e.ID, e.CompanyID, e.PublicID, e.AssignedAgentID, nullString(e.SponsorUserID),
		e.Status, e.DisplayName, e.ReceiveMode, e.CreatedAt)
	if err != nil {
		return false, fmt.Errorf("insert email endpoint: %w", err)
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

// GetEndpoint returns an endpoint by id.
func (s *Store) GetEndpoint(ctx context.Context, q db.Querier, id string) (domain.EmailEndpoint, error) {
	return queryOne(ctx, q, "get email inbox", scanEndpoint, `SELECT `+endpointCols+` FROM email_endpoints WHERE id = $1`, id)
}

// EndpointByPublicID returns the endpoint behind a webhook URL.
func (s *Store) EndpointByPublicID(ctx context.Context, q db.Querier, publicID string) (domain.EmailEndpoint, error) {
	return queryOne(ctx, q, "get email inbox", scanEndpoint, `SELECT `+endpointCols+` FROM email_endpoints WHERE public_id = $1`, publicID)
}

// ListEndpoints returns a company's non-archived endpoints, newest first.
func (s *Store) ListEndpoints(ctx context.Context, q db.Querier, companyID string) ([]domain.EmailEndpoint, error) {
	return queryAll(ctx, q, "list email inboxes", scanEndpoint, `SELECT `+endpointCols+` FROM email_endpoints
		WHERE company_id = $1 AND status <> 'archived' ORDER BY created_at DESC, id`, companyID)
}

// ListEndpointsByStatus returns every endpoint in one of statuses (all companies).
func (s *Store) ListEndpointsByStatus(ctx context.Context, q db.Querier, statuses ...string) ([]domain.EmailEndpoint, error) {
	args := make([]any, len(statuses))
	ph := ""
	for i, st := range statuses {
		args[i] = st
		if i > 0 {
			ph += ", "
		}
		ph += fmt.Sprintf("$%d", i+1)
	}
	return queryAll(ctx, q, "list email inboxes", scanEndpoint, `SELECT `+endpointCols+` FROM email_endpoints
		WHERE status IN (`+ph+`) ORDER BY created_at, id`, args...)
}

// UpdateEndpoint writes every mutable column of e.
func (s *Store) UpdateEndpoint(ctx context.Context, q db.Querier, e *domain.EmailEndpoint) error {
	e.UpdatedAt = s.Now()
	_, err := q.ExecContext(ctx, `UPDATE email_endpoints SET assigned_agent_id = $2, sponsor_user_id = $3,
		credential_connection_id = $4, status = $5, address = $6, display_name = $7, provider_account_id = $8,
		receive_mode = $9, webhook_id = $10, owned_api_key_id = $11, activation_at = $12, sync_checkpoint = $13,
		last_sync_at = $14, health_message = $15, last_error = $16, last_event_at = $17, last_publication_at = $18,
		activated_at = $19, archived_at = $20, updated_at = $21 WHERE id = $1`,
		e.ID, e.AssignedAgentID, nullString(e.SponsorUserID), nullString(e.CredentialConnectionID), e.Status,
		nullString(e.Address), e.DisplayName, nullString(e.ProviderAccountID), e.ReceiveMode, nullString(e.WebhookID),
		nullString(e.OwnedAPIKeyID), nullTime(e.ActivationAt), nullTime(e.SyncCheckpoint), nullTime(e.LastSyncAt),
		e.HealthMessage, nullString(e.LastError), nullTime(e.LastEventAt), nullTime(e.LastPublicationAt),
		nullTime(e.ActivatedAt), nullTime(e.ArchivedAt), e.UpdatedAt)
	if err != nil {
		if db.IsUniqueViolation(err) {
			return fmt.Errorf("update email inbox: %w", ErrConflict)
		}
		return fmt.Errorf("update email inbox: %w", err)
	}
	return nil
}

// setEndpointColumn writes one provider-registration column of an endpoint
// ("" is NULL) and its updated_at; column is one of a fixed set below.
func (s *Store) setEndpointColumn(ctx context.Context, q db.Querier, id, column, value string) error {
	if _, err := q.ExecContext(ctx, `UPDATE email_endpoints SET `+column+` = $2, updated_at = $3 WHERE id = $1`,
		id, nullString(value), s.Now()); err != nil {
		return fmt.Errorf("update email inbox %s: %w", column, err)
	}
	return nil
}

// SetEndpointCredential records the saved credential an endpoint was set up
// from ("" for an endpoint set up from a pasted key).
func (s *Store) SetEndpointCredential(ctx context.Context, q db.Querier, id, connectionID string) error {
	return s.setEndpointColumn(ctx, q, id, "credential_connection_id", connectionID)
}

// SetEndpointOwnedKey records the provider API key Paperclip created for an
// endpoint (its runtime key).
func (s *Store) SetEndpointOwnedKey(ctx context.Context, q db.Querier, id, keyID string) error {
	return s.setEndpointColumn(ctx, q, id, "owned_api_key_id", keyID)
}

// SetEndpointWebhook records the provider webhook Paperclip registered for
// an endpoint.
func (s *Store) SetEndpointWebhook(ctx context.Context, q db.Querier, id, webhookID string) error {
	return s.setEndpointColumn(ctx, q, id, "webhook_id", webhookID)
}

// LockEndpoint takes the endpoint row's write lock for the transaction.
func (s *Store) LockEndpoint(ctx context.Context, tx *sql.Tx, id string) error {
	return execOne(ctx, tx, "lock email inbox", "get email inbox", `UPDATE email_endpoints SET updated_at = updated_at WHERE id = $1`, id)
}

// TouchEndpointEvent records that an event arrived for the endpoint. It
// writes at most once per second per endpoint: every admission touching the
// endpoint row would serialize concurrent admissions of one busy inbox on
// that row's lock in PostgreSQL.
//
// Why SKIP LOCKED on PostgreSQL: every processing transaction of the inbox
// holds the row FOR SHARE (its fence) until it commits. An UPDATE waited
// for all of them, and while it waited every new fence queued behind it,
// so once a second the inbox's processing stalled for as long as its
// slowest transaction in flight (and the socket reader behind the
// admission with it): the admission → wake tail of new-thread mail, whose
// transactions are the longest. The time is informational (shown as the
// inbox's last event), so an admission that finds the row locked leaves
// it to a later one; at any steady rate one finds it free within the
// second.
func (s *Store) TouchEndpointEvent(ctx context.Context, q db.Querier, endpointID string) error {
	now := s.Now()
	query := `UPDATE email_endpoints SET last_event_at = $2 WHERE id = $1
		AND (last_event_at IS NULL OR last_event_at < $3)`
	if s.DB.Dialect == db.Postgres {
		query = `UPDATE email_endpoints SET last_event_at = $2 WHERE id = (SELECT id FROM email_endpoints WHERE id = $1
		AND (last_event_at IS NULL OR last_event_at < $3) FOR NO KEY UPDATE SKIP LOCKED)`
	}
	_, err := q.ExecContext(ctx, query, endpointID, now, now.Add(-time.Second))
	if err != nil {
		return fmt.Errorf("record email event time: %w", err)
	}
	return nil
}

// EndpointShared reads a whole endpoint row inside a transaction, holding a
// shared row lock on PostgreSQL (FOR SHARE). Concurrent message processing
// of one inbox shares the lock, while pause/disconnect (which update the
// row) wait for in-flight work, so no mail is retained into an endpoint
// that has just stopped. Processing reads the full row rather than only
// the status so that the credential re-check before a wake runs on the row
// as of this transaction, in the same round trip.
func (s *Store) EndpointShared(ctx context.Context, tx *sql.Tx, endpointID string) (domain.EmailEndpoint, error) {
	suffix := ""
	if s.DB.Dialect == db.Postgres {
		suffix = " FOR SHARE"
	}
	return queryOne(ctx, tx, "get email inbox", scanEndpoint, `SELECT `+endpointCols+` FROM email_endpoints WHERE id = $1`+suffix, endpointID)
}

// ForceCatchup clears last_sync_at so the next worker tick scans the inbox
// (after a WebSocket acknowledgement or a reconnect).
func (s *Store) ForceCatchup(ctx context.Context, q db.Querier, endpointID string) error {
	if _, err := q.ExecContext(ctx, `UPDATE email_endpoints SET last_sync_at = NULL WHERE id = $1`, endpointID); err != nil {
		return fmt.Errorf("force email catch-up: %w", err)
	}
	return nil
}

// FinishCatchup records a completed catch-up scan: the receipt-time
// checkpoint the next scan starts from (minus its overlap) and when it ran.
func (s *Store) FinishCatchup(ctx context.Context, q db.Querier, endpointID string, checkpoint time.Time) error {
	if _, err := q.ExecContext(ctx, `UPDATE email_endpoints SET sync_checkpoint = $2, last_sync_at = $3 WHERE id = $1`,
		endpointID, checkpoint.UTC(), s.Now()); err != nil {
		return fmt.Errorf("record email catch-up: %w", err)
	}
	return nil
}

// SetEndpointHealth writes an endpoint's health message and last error
// (empty lastError clears it) without touching any other column.
func (s *Store) SetEndpointHealth(ctx context.Context, q db.Querier, endpointID, health, lastError string) error {
	if _, err := q.ExecContext(ctx, `UPDATE email_endpoints SET health_message = $2, last_error = $3 WHERE id = $1`,
		endpointID, health, nullString(lastError)); err != nil {
		return fmt.Errorf("record email inbox health: %w", err)
	}
	return nil
}

// EndpointAutoSubmitted reports whether the endpoint stamps loop-guard headers.
func (s *Store) EndpointAutoSubmitted(ctx context.Context, q db.Querier, endpointID string) (bool, error) {
	var v bool
	if err := q.QueryRowContext(ctx, `SELECT auto_submitted FROM email_endpoints WHERE id = $1`, endpointID).Scan(&v); err != nil {
		return true, notFound("get email inbox", err)
	}
	return v, nil
}

// SetEndpointAutoSubmitted switches the loop-guard headers for an endpoint.
func (s *Store) SetEndpointAutoSubmitted(ctx context.Context, q db.Querier, endpointID string, on bool) error {
	if _, err := q.ExecContext(ctx, `UPDATE email_endpoints SET auto_submitted = $2, updated_at = $3 WHERE id = $1`, endpointID, on, s.Now()); err != nil {
		return fmt.Errorf("set auto-submitted: %w", err)
	}
	return nil
}

// TouchEndpointPublication records the time of the endpoint's last send.
func (s *Store) TouchEndpointPublication(ctx context.Context, q db.Querier, endpointID string) error {
	if _, err := q.ExecContext(ctx, `UPDATE email_endpoints SET last_publication_at = $2 WHERE id = $1`, endpointID, s.Now()); err != nil {
		return fmt.Errorf("touch endpoint publication: %w", err)
	}
	return nil
}
