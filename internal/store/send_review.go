package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/mail"
	"strings"
	"time"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/domain"
)

// SendPolicy is one inbox's send policy (docs/email-pipeline.md, "Review
// before send"). An inbox without a stored policy has review "off" and no
// recipient lists.
type SendPolicy struct {
	EndpointID         string
	CompanyID          string
	Review             string
	AllowedRecipients  []string
	BlockedRecipients  []string
	ReviewExpiresHours int
	UpdatedAt          time.Time
}

// DefaultReviewExpiresHours is how long a held send waits for a reviewer
// when the policy does not say.
const DefaultReviewExpiresHours = 72

// GetSendPolicy returns the endpoint's send policy, or the default (review
// off) when none is stored.
func (s *Store) GetSendPolicy(ctx context.Context, q db.Querier, endpointID string) (SendPolicy, error) {
	p := SendPolicy{EndpointID: endpointID, Review: "off", AllowedRecipients: []string{}, BlockedRecipients: []string{},
		ReviewExpiresHours: DefaultReviewExpiresHours}
	var allowed, blocked string
	var updated time.Time
	err := q.QueryRowContext(ctx, `SELECT company_id, review, allowed_recipients, blocked_recipients, review_expires_hours, updated_at
		FROM email_send_policies WHERE endpoint_id = $1`, endpointID).Scan(&p.CompanyID, &p.Review, &allowed, &blocked, &p.ReviewExpiresHours, &updated)
	if err == sql.ErrNoRows {
		return p, nil
	}
	if err != nil {
		return p, fmt.Errorf("get send policy: %w", err)
	}
	p.UpdatedAt = updated.UTC()
	if err := json.Unmarshal([]byte(allowed), &p.AllowedRecipients); err != nil {
		return p, fmt.Errorf("decode allowed recipients: %w", err)
	}
	if err := json.Unmarshal([]byte(blocked), &p.BlockedRecipients); err != nil {
		return p, fmt.Errorf("decode blocked recipients: %w", err)
	}
	return p, nil
}

// PutSendPolicy stores the endpoint's send policy; with onlyIfAbsent it
// keeps a policy already stored (a default applied at inbox creation).
func (s *Store) PutSendPolicy(ctx context.Context, q db.Querier, p *SendPolicy, onlyIfAbsent bool) error {
	p.UpdatedAt = s.Now()
	allowed, _ := json.Marshal(nonNil(p.AllowedRecipients))
	blocked, _ := json.Marshal(nonNil(p.BlockedRecipients))
	conflict := `DO UPDATE SET review = excluded.review, allowed_recipients = excluded.allowed_recipients,
		blocked_recipients = excluded.blocked_recipients, review_expires_hours = excluded.review_expires_hours, updated_at = excluded.updated_at`
	if onlyIfAbsent {
		conflict = `DO NOTHING`
	}
	if _, err := q.ExecContext(ctx, `INSERT INTO email_send_policies (endpoint_id, company_id, review, allowed_recipients, blocked_recipients,
		review_expires_hours, updated_at) VALUES ($1,$2,$3,$4,$5,$6,$7) ON CONFLICT (endpoint_id) `+conflict,
		p.EndpointID, p.CompanyID, p.Review, string(allowed), string(blocked), p.ReviewExpiresHours, p.UpdatedAt); err != nil {
		return fmt.Errorf("put send policy: %w", err)
	}
	return nil
}

func nonNil(in []string) []string {
	if in == nil {
		return []string{}
	}
	return in
}

// RememberRecipients records addresses (lower-cased) the endpoint may mail
// at once under review "new_recipients"; source says why (approved, sent,
// wrote_in).
func (s *Store) RememberRecipients(ctx context.Context, q db.Querier, endpointID string, addresses []string, source string) error {
	now := s.Now()
	for _, a := range addresses {
		if _, err := q.ExecContext(ctx, `INSERT INTO email_known_recipients (endpoint_id, address, source, created_at)
			VALUES ($1, $2, $3, $4) ON CONFLICT (endpoint_id, address) DO NOTHING`, endpointID, strings.ToLower(a), source, now); err != nil {
			return fmt.Errorf("remember recipient: %w", err)
		}
	}
	return nil
}

// UnknownRecipients returns which of addresses (lower-cased bare
// addresses) the endpoint has never been cleared to mail: not remembered
// (approved or sent to before) and never the sender of mail it received.
// A sender found in retained mail is remembered, so the scan of the
// inbox's received mail runs once per address.
func (s *Store) UnknownRecipients(ctx context.Context, q db.Querier, endpointID string, addresses []string) ([]string, error) {
	var out []string
	for _, a := range addresses {
		var n int
		if err := q.QueryRowContext(ctx, `SELECT COUNT(*) FROM email_known_recipients WHERE endpoint_id = $1 AND address = $2`,
			endpointID, a).Scan(&n); err != nil {
			return nil, fmt.Errorf("check known recipient: %w", err)
		}
		if n > 0 {
			continue
		}
		wrote, err := s.wroteIn(ctx, q, endpointID, a)
		if err != nil {
			return nil, err
		}
		if wrote {
			if err := s.RememberRecipients(ctx, q, endpointID, []string{a}, "wrote_in"); err != nil {
				return nil, err
			}
			continue
		}
		out = append(out, a)
	}
	return out, nil
}

// wroteIn reports whether the endpoint retained mail received from addr.
// Why LIKE and then a parse: the envelope is JSON (text on SQLite, jsonb on PostgreSQL, hence the cast);
// the LIKE narrows the scan to the inbox's messages mentioning the
// address, and the parsed From decides (a Cc of the address is no
// "wrote in").
func (s *Store) wroteIn(ctx context.Context, q db.Querier, endpointID, addr string) (bool, error) {
	rows, err := q.QueryContext(ctx, `SELECT CAST(envelope AS TEXT) FROM email_messages WHERE endpoint_id = $1 AND direction = 'inbound'
		AND LOWER(CAST(envelope AS TEXT)) LIKE $2 LIMIT 200`, endpointID, "%"+addr+"%")
	if err != nil {
		return false, fmt.Errorf("check sender: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var raw string
		if err := rows.Scan(&raw); err != nil {
			return false, fmt.Errorf("check sender: %w", err)
		}
		var env domain.EmailEnvelope
		if json.Unmarshal([]byte(raw), &env) != nil {
			continue
		}
		from := env.From
		if a, err := mail.ParseAddress(from); err == nil {
			from = a.Address
		}
		if strings.EqualFold(strings.TrimSpace(from), addr) {
			return true, nil
		}
	}
	return false, rows.Err()
}

// SendReview is a held send's review row.
type SendReview struct {
	PublicationID   string
	CompanyID       string
	EndpointID      string
	Status          string
	Reasons         []string
	ExpiresAt       time.Time
	DecidedByUserID string
	DecisionReason  string
	Changes         json.RawMessage
	DecidedAt       *time.Time
	CreatedAt       time.Time
}

const reviewCols = `publication_id, company_id, endpoint_id, status, reasons, expires_at, decided_by_user_id, decision_reason,
	changes, decided_at, created_at`

func scanReview(row rowScanner) (SendReview, error) {
	var r SendReview
	var reasons string
	var by, why sql.NullString
	var changes []byte
	var decided sql.NullTime
	if err := row.Scan(&r.PublicationID, &r.CompanyID, &r.EndpointID, &r.Status, &reasons, &r.ExpiresAt, &by, &why, &changes,
		&decided, &r.CreatedAt); err != nil {
		return r, err
	}
	_ = json.Unmarshal([]byte(reasons), &r.Reasons)
	r.DecidedByUserID, r.DecisionReason, r.Changes = by.String, why.String, rawJSON(changes)
	r.DecidedAt, r.ExpiresAt, r.CreatedAt = timePtr(decided), r.ExpiresAt.UTC(), r.CreatedAt.UTC()
	return r, nil
}

// InsertSendReview records that a send is held for review.
func (s *Store) InsertSendReview(ctx context.Context, q db.Querier, r *SendReview) error {
	r.CreatedAt, r.Status = s.Now(), "awaiting_review"
	reasons, _ := json.Marshal(nonNil(r.Reasons))
	if _, err := q.ExecContext(ctx, `INSERT INTO email_send_reviews (publication_id, company_id, endpoint_id, status, reasons, expires_at,
		created_at) VALUES ($1,$2,$3,$4,$5,$6,$7)`, r.PublicationID, r.CompanyID, r.EndpointID, r.Status, string(reasons), r.ExpiresAt.UTC(),
		r.CreatedAt); err != nil {
		return fmt.Errorf("insert send review: %w", err)
	}
	return nil
}

// GetSendReview returns a send's review.
func (s *Store) GetSendReview(ctx context.Context, q db.Querier, publicationID string) (SendReview, error) {
	return queryOne(ctx, q, "get send review", scanReview, `SELECT `+reviewCols+` FROM email_send_reviews WHERE publication_id = $1`, publicationID)
}

// SendReviewsFor returns the reviews of the given sends, by publication id.
func (s *Store) SendReviewsFor(ctx context.Context, q db.Querier, ids []string) (map[string]SendReview, error) {
	out := map[string]SendReview{}
	if len(ids) == 0 {
		return out, nil
	}
	args := make([]any, len(ids))
	ph := make([]string, len(ids))
	for i, id := range ids {
		args[i], ph[i] = id, fmt.Sprintf("$%d", i+1)
	}
	rs, err := queryAll(ctx, q, "list send reviews", scanReview, `SELECT `+reviewCols+` FROM email_send_reviews
		WHERE publication_id IN (`+strings.Join(ph, ",")+`)`, args...)
	if err != nil {
		return nil, err
	}
	for _, r := range rs {
		out[r.PublicationID] = r
	}
	return out, nil
}

// DecideSendReview moves a review from awaiting_review to status and
// reports whether it did. Why conditional: two reviewers (or a reviewer
// and the expiry) racing on one send must not both win; the loser sees
// false and answers with the outcome the winner set.
func (s *Store) DecideSendReview(ctx context.Context, q db.Querier, publicationID, status, userID, reason string, changes json.RawMessage) (bool, error) {
	res, err := q.ExecContext(ctx, `UPDATE email_send_reviews SET status = $2, decided_by_user_id = $3, decision_reason = $4, changes = $5,
		decided_at = $6 WHERE publication_id = $1 AND status = 'awaiting_review'`,
		publicationID, status, nullString(userID), nullString(reason), nullJSON(changes), s.Now())
	if err != nil {
		return false, fmt.Errorf("decide send review: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("decide send review: %w", err)
	}
	return n == 1, nil
}

// ExpiredReviews returns up to limit held sends whose review expired by now.
func (s *Store) ExpiredReviews(ctx context.Context, q db.Querier, now time.Time, limit int) ([]SendReview, error) {
	return queryAll(ctx, q, "expired send reviews", scanReview, `SELECT `+reviewCols+` FROM email_send_reviews
		WHERE status = 'awaiting_review' AND expires_at <= $1 ORDER BY expires_at LIMIT $2`, now.UTC(), limit)
}

// NextReviewExpiry returns when the next held send expires (zero: none held).
func (s *Store) NextReviewExpiry(ctx context.Context, q db.Querier) (time.Time, error) {
	// Why ORDER BY … LIMIT 1 and not MIN(): SQLite types an aggregate's
	// result by value, not by the column, so MIN of a timestamp comes back
	// as text the driver cannot scan into a time.
	var t time.Time
	err := q.QueryRowContext(ctx, `SELECT expires_at FROM email_send_reviews WHERE status = 'awaiting_review'
		ORDER BY expires_at LIMIT 1`).Scan(&t)
	if err == sql.ErrNoRows {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("next review expiry: %w", err)
	}
	return t.UTC(), nil
}

// CountHeldSends counts sends awaiting review, all companies.
func (s *Store) CountHeldSends(ctx context.Context, q db.Querier) (int, error) {
	var n int
	if err := q.QueryRowContext(ctx, `SELECT COUNT(*) FROM email_send_reviews WHERE status = 'awaiting_review'`).Scan(&n); err != nil {
		return 0, fmt.Errorf("count held sends: %w", err)
	}
	return n, nil
}

// CountCompanyHeldSends counts one company's sends awaiting review (the
// Review navigation badge).
func (s *Store) CountCompanyHeldSends(ctx context.Context, q db.Querier, companyID string) (int, error) {
	var n int
	if err := q.QueryRowContext(ctx, `SELECT COUNT(*) FROM email_send_reviews WHERE company_id = $1 AND status = 'awaiting_review'`,
		companyID).Scan(&n); err != nil {
		return 0, fmt.Errorf("count held sends: %w", err)
	}
	return n, nil
}

// SetApprovedRequest stores the version of a send a reviewer approved with
// edits; the original request stays as it was.
func (s *Store) SetApprovedRequest(ctx context.Context, q db.Querier, publicationID string, approved json.RawMessage) error {
	if _, err := q.ExecContext(ctx, `UPDATE email_sends SET approved_request = $2, updated_at = $3 WHERE publication_id = $1`,
		publicationID, nullJSON(approved), s.Now()); err != nil {
		return fmt.Errorf("set approved request: %w", err)
	}
	return nil
}
