package outbound

import (
	"context"
	"encoding/json"

	"github.com/paperclipai/paperclipai/internal/authz"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/store"
)

// Page sizes of the sends listing.
const (
	defaultListLimit = store.DefaultPageLimit
	maxListLimit     = store.MaxPageLimit
)

// ListedSend is one send in the operator's listing: its summary, its
// task's title and its recipients.
type ListedSend struct {
	SendSummary
	TaskTitle  string         `json:"taskTitle"`
	Recipients SendRecipients `json:"recipients"`
}

// SendRecipients are a send's recipients: a new email's own, or those a
// reply computes from the message it answers.
type SendRecipients struct {
	To  []string `json:"to"`
	Cc  []string `json:"cc"`
	Bcc []string `json:"bcc"`
}

// SendList is one page of sends, newest first; NextCursor continues it
// (null on the last page).
type SendList struct {
	Items      []ListedSend `json:"items"`
	NextCursor *string      `json:"nextCursor"`
}

// ListQuery selects a page of a company's sends.
type ListQuery struct {
	Outcome domain.SendOutcome
	Limit   int
	Cursor  string
}

// listOutcomes are the outcome filters the listing accepts.
var listOutcomes = []domain.SendOutcome{domain.OutcomeQueued, domain.OutcomeSent, domain.OutcomeDelivered, domain.OutcomeFailed,
	domain.OutcomeUncertain, domain.OutcomeAwaitingReview, domain.OutcomeRejected, domain.OutcomeExpired}

// ListSends returns a page of a company's sends for a connection manager,
// newest first (docs/operations.md, "Sends that need an operator"): the
// way to find uncertain and failed sends and the provider message id a
// resolution needs.
func (s *Service) ListSends(ctx context.Context, a authz.Actor, companyID string, q ListQuery) (SendList, error) {
	var zero SendList
	if err := s.Email.RequireEnabled(ctx); err != nil {
		return zero, err
	}
	if q.Outcome == domain.OutcomeAwaitingReview {
		// The review queue: every reviewer (owners, admins, members) reads it.
		if err := s.reviewAccess(ctx, a, companyID); err != nil {
			return zero, err
		}
	} else if err := s.Email.RequireConnectionManager(ctx, a, companyID); err != nil {
		return zero, err
	}
	if q.Outcome != "" && !containsOutcome(q.Outcome) {
		return zero, badRequest("outcome must be one of queued, sent, delivered, failed, uncertain, awaiting_review, rejected or expired")
	}
	if q.Limit == 0 {
		q.Limit = defaultListLimit
	}
	if q.Limit < 1 || q.Limit > maxListLimit {
		return zero, badRequest("limit must be between 1 and %d", maxListLimit)
	}
	var after *store.PublicationCursor
	if q.Cursor != "" {
		c, err := decodeCursor(q.Cursor)
		if err != nil {
			return zero, err
		}
		after = &c
	}
	// One row more than the page tells whether another page follows.
	rows, err := s.Store.ListCompanyPublications(ctx, s.Store.DB, companyID, q.Outcome, after, q.Limit+1)
	if err != nil {
		return zero, err
	}
	out := SendList{Items: []ListedSend{}}
	if len(rows) > q.Limit {
		rows = rows[:q.Limit]
		last := rows[len(rows)-1]
		c := encodeCursor(store.PublicationCursor{CreatedAt: last.CreatedAt, ID: last.ID})
		out.NextCursor = &c
	}
	endpoints := map[string]domain.EmailEndpoint{}
	for _, p := range rows {
		item := ListedSend{SendSummary: summarizeSend(p.EmailPublication), TaskTitle: p.IssueTitle,
			Recipients: s.sendRecipients(ctx, p.EmailPublication, endpoints)}
		out.Items = append(out.Items, item)
	}
	sums := make([]*SendSummary, len(out.Items))
	for i := range out.Items {
		sums[i] = &out.Items[i].SendSummary
	}
	if err := s.attachReviews(ctx, sums); err != nil {
		return zero, err
	}
	return out, nil
}

// sendRecipients reads a send's recipients from its stored request; a
// reply's are computed from the retained message it answers, as at
// acceptance. endpoints caches the inboxes read so far.
func (s *Service) sendRecipients(ctx context.Context, p store.EmailPublication, endpoints map[string]domain.EmailEndpoint) SendRecipients {
	out := SendRecipients{To: []string{}, Cc: []string{}, Bcc: []string{}}
	var req SendRequest
	if json.Unmarshal(p.Request, &req) != nil {
		return out
	}
	if !req.IsReply() {
		out.To, out.Cc, out.Bcc = nonNil(req.To), nonNil(req.Cc), nonNil(req.Bcc)
		return out
	}
	ep, ok := endpoints[p.EndpointID]
	if !ok {
		var err error
		if ep, err = s.Store.GetEndpoint(ctx, s.Store.DB, p.EndpointID); err != nil {
			return out
		}
		endpoints[p.EndpointID] = ep
	}
	if req.ReplyAll == nil {
		f := false
		req.ReplyAll = &f
	}
	if to, cc, _, err := s.recipients(ctx, s.Store.DB, ep, req, p.ConversationID); err == nil {
		out.To, out.Cc = nonNil(to), nonNil(cc)
	}
	return out
}

func containsOutcome(o domain.SendOutcome) bool {
	for _, v := range listOutcomes {
		if v == o {
			return true
		}
	}
	return false
}

// encodeCursor renders a cursor as the opaque token every listing uses
// (store.EncodeCursor).
func encodeCursor(c store.PublicationCursor) string {
	return store.EncodeCursor(store.Cursor{At: c.CreatedAt, ID: c.ID})
}

// decodeCursor parses a token from encodeCursor; anything else is
// store.ErrBadCursor, which the API edge answers as an invalid cursor.
func decodeCursor(v string) (store.PublicationCursor, error) {
	c, err := store.DecodeCursor(v, store.ValidID)
	if err != nil || c.Key != "" {
		return store.PublicationCursor{}, store.ErrBadCursor
	}
	return store.PublicationCursor{CreatedAt: c.At, ID: c.ID}, nil
}
