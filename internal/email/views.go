package email

import (
	"context"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/paperclipai/paperclipai/internal/authz"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/httpx"
	"github.com/paperclipai/paperclipai/internal/store"
)

// The read-only views of one inbox for the web UI and other clients: its
// conversations and its recent activity (docs/api.md, "Email").

// ListAllInboxes returns every endpoint of the company visible to a board
// actor, disconnected (archived) ones included, newest first.
func (s *Service) ListAllInboxes(ctx context.Context, a authz.Actor, companyID string) ([]domain.EmailEndpointSummary, error) {
	if err := authz.RequireBoard(a); err != nil {
		return nil, err
	}
	if _, err := s.Authz.CompanyAccess(ctx, s.Store.DB, a, companyID, false); err != nil {
		return nil, err
	}
	eps, err := s.Store.ListAllEndpoints(ctx, s.Store.DB, companyID)
	if err != nil {
		return nil, err
	}
	return s.Summaries(ctx, eps), nil
}

// readableEndpoint loads the path endpoint for an actor who may read it:
// company read access, and for an agent only the inbox assigned to it.
// Everything else is the same 404.
func (s *Service) readableEndpoint(r *http.Request) (domain.EmailEndpoint, error) {
	notFound := httpx.Errorf(http.StatusNotFound, "Email inbox not found")
	id, err := pathUUID(r, "endpointId", "invalid endpointId: must be a UUID")
	if err != nil {
		return domain.EmailEndpoint{}, err
	}
	ep, err := s.Store.GetEndpoint(r.Context(), s.Store.DB, id)
	if err != nil {
		return ep, notFound
	}
	a := httpx.Actor(r)
	if _, err := s.Authz.CompanyAccess(r.Context(), s.Store.DB, a, ep.CompanyID, false); err != nil {
		return ep, notFound
	}
	if a.Kind == authz.KindAgent && ep.AssignedAgentID != a.AgentID() {
		return ep, notFound
	}
	return ep, nil
}

// limitParam reads ?limit= (default def, 1..max).
func limitParam(r *http.Request, def, max int) (int, error) {
	v := r.URL.Query().Get("limit")
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > max {
		return 0, httpx.Errorf(http.StatusBadRequest, "limit must be between 1 and %d", max)
	}
	return n, nil
}

// ConversationSummary is one email conversation of an inbox with its task.
type ConversationSummary struct {
	ID             string    `json:"id"`
	IssueID        string    `json:"issueId"`
	IssueTitle     string    `json:"issueTitle"`
	IssueStatus    string    `json:"issueStatus"`
	Subject        string    `json:"subject"`
	State          string    `json:"state"`
	LastActivityAt time.Time `json:"lastActivityAt"`
	CreatedAt      time.Time `json:"createdAt"`
}

func (s *Service) listConversations(w http.ResponseWriter, r *http.Request) error {
	ep, err := s.readableEndpoint(r)
	if err != nil {
		return err
	}
	limit, err := limitParam(r, 200, 500)
	if err != nil {
		return err
	}
	rows, err := s.Store.ListConversationsWithIssues(r.Context(), s.Store.DB, ep.ID, limit)
	if err != nil {
		return err
	}
	out := make([]ConversationSummary, 0, len(rows))
	for _, c := range rows {
		out = append(out, ConversationSummary{ID: c.ID, IssueID: c.IssueID, IssueTitle: c.IssueTitle, IssueStatus: c.IssueStatus,
			Subject: c.Subject, State: c.State, LastActivityAt: c.LastActivityAt, CreatedAt: c.CreatedAt})
	}
	httpx.WriteJSON(w, http.StatusOK, out)
	return nil
}

// InboxActivity is an inbox's inbound queue and its recent deliveries and
// sends, newest first.
type InboxActivity struct {
	Queue InboxQueue     `json:"queue"`
	Items []ActivityItem `json:"items"`
}

// InboxQueue counts the inbox's waiting inbound deliveries.
type InboxQueue struct {
	Received      int        `json:"received"`
	Processing    int        `json:"processing"`
	Retry         int        `json:"retry"`
	OldestRetryAt *time.Time `json:"oldestRetryAt"`
}

// ActivityItem is one delivery (an admitted provider event) or one send.
type ActivityItem struct {
	Kind      string `json:"kind"` // "delivery" or "send"
	ID        string `json:"id"`
	EventKind string `json:"eventKind,omitempty"`
	// State is a delivery's state; Outcome a send's outcome.
	State   string `json:"state,omitempty"`
	Outcome string `json:"outcome,omitempty"`
	// Error is already redacted when stored.
	Error         *string    `json:"error"`
	IssueID       *string    `json:"issueId"`
	Attempts      int        `json:"attempts"`
	NextAttemptAt *time.Time `json:"nextAttemptAt"`
	At            time.Time  `json:"at"`
}

func optString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func (s *Service) inboxActivity(w http.ResponseWriter, r *http.Request) error {
	ep, err := s.readableEndpoint(r)
	if err != nil {
		return err
	}
	limit, err := limitParam(r, 50, 200)
	if err != nil {
		return err
	}
	ctx := r.Context()
	q, err := s.Store.EndpointDeliveryQueue(ctx, s.Store.DB, ep.ID)
	if err != nil {
		return err
	}
	dels, err := s.Store.RecentDeliveries(ctx, s.Store.DB, ep.ID, limit)
	if err != nil {
		return err
	}
	pubs, err := s.Store.RecentPublications(ctx, s.Store.DB, ep.ID, limit)
	if err != nil {
		return err
	}
	out := InboxActivity{Queue: InboxQueue{Received: q.Received, Processing: q.Processing, Retry: q.Retry, OldestRetryAt: q.OldestRetryAt},
		Items: make([]ActivityItem, 0, len(dels)+len(pubs))}
	for _, d := range dels {
		// The deduplication key is "<event type>:<provider message id>"
		// (the event_kind column only says "message").
		kind, _, _ := strings.Cut(d.DeduplicationKey, ":")
		it := ActivityItem{Kind: "delivery", ID: d.ID, EventKind: kind, State: string(d.State), Error: optString(d.RedactedError),
			IssueID: optString(d.IssueID), Attempts: d.Attempts, At: d.ReceivedAt}
		if d.State == domain.DeliveryRetry {
			it.NextAttemptAt = d.NextAttemptAt
		}
		out.Items = append(out.Items, it)
	}
	for _, p := range pubs {
		it := ActivityItem{Kind: "send", ID: p.ID, Outcome: string(p.Outcome), Error: optString(p.Error), IssueID: optString(p.IssueID),
			Attempts: p.Attempts, At: p.CreatedAt}
		if p.Outcome == domain.OutcomeQueued || p.Outcome == domain.OutcomeUncertain {
			it.NextAttemptAt = p.NextAttemptAt
		}
		out.Items = append(out.Items, it)
	}
	// Both lists are newest first; merge them and keep the newest limit.
	sort.SliceStable(out.Items, func(i, j int) bool { return out.Items[i].At.After(out.Items[j].At) })
	if len(out.Items) > limit {
		out.Items = out.Items[:limit]
	}
	httpx.WriteJSON(w, http.StatusOK, out)
	return nil
}

// Conversation states of the company email list, most urgent first.
const (
	ConvDeliveryFailed = "delivery_failed"
	ConvReplyPending   = "reply_pending"
	ConvAgentWorking   = "agent_working"
	ConvAwaitingReview = "awaiting_review"
	ConvReplied        = "replied"
	ConvNew            = "new"
)

// CompanyConversation is one conversation of the company's email list:
// who wrote, about what, to which inbox, who answers it and where it
// stands (State, one of the Conv* constants).
type CompanyConversation struct {
	ID              string    `json:"id"`
	EndpointID      string    `json:"endpointId"`
	Address         string    `json:"address"`
	IssueID         string    `json:"issueId"`
	IssueTitle      string    `json:"issueTitle"`
	IssueStatus     string    `json:"issueStatus"`
	AssigneeAgentID *string   `json:"assigneeAgentId"`
	Subject         string    `json:"subject"`
	From            string    `json:"from"`
	Snippet         string    `json:"snippet"`
	State           string    `json:"state"`
	PendingSends    int       `json:"pendingSends"`
	LastActivityAt  time.Time `json:"lastActivityAt"`
	CreatedAt       time.Time `json:"createdAt"`
}

// conversationState says where a conversation stands, most urgent first:
// its newest send failed; a send is queued or uncertain; the agent runs on
// it; its task waits for review; it was answered; else it is new.
func conversationState(c store.CompanyConversation) string {
	switch {
	case c.LastOutcome == string(domain.OutcomeFailed):
		return ConvDeliveryFailed
	case c.PendingSends > 0:
		return ConvReplyPending
	case c.ActiveRuns > 0:
		return ConvAgentWorking
	case c.IssueStatus == domain.IssueInReview:
		return ConvAwaitingReview
	case c.LastDirection == "outbound" || c.LastOutcome == string(domain.OutcomeSent) || c.LastOutcome == string(domain.OutcomeDelivered):
		return ConvReplied
	}
	return ConvNew
}

// listCompanyConversations serves GET /api/companies/{companyId}/email/conversations
// (?endpointId=&limit=): the company's conversations across its inboxes,
// newest activity first, for board actors.
func (s *Service) listCompanyConversations(w http.ResponseWriter, r *http.Request) error {
	companyID, err := pathUUID(r, "companyId", "invalid companyId: must be a UUID")
	if err != nil {
		return err
	}
	a := httpx.Actor(r)
	if err := authz.RequireBoard(a); err != nil {
		return err
	}
	if _, err := s.Authz.CompanyAccess(r.Context(), s.Store.DB, a, companyID, false); err != nil {
		return err
	}
	endpointID := r.URL.Query().Get("endpointId")
	if endpointID != "" && !store.ValidID(endpointID) {
		return httpx.Errorf(http.StatusBadRequest, "endpointId must be a UUID")
	}
	limit, err := limitParam(r, 200, 500)
	if err != nil {
		return err
	}
	rows, err := s.Store.ListCompanyConversations(r.Context(), s.Store.DB, companyID, endpointID, limit)
	if err != nil {
		return err
	}
	out := make([]CompanyConversation, 0, len(rows))
	for _, c := range rows {
		cc := CompanyConversation{ID: c.ID, EndpointID: c.EndpointID, Address: c.Address, IssueID: c.IssueID, IssueTitle: c.IssueTitle,
			IssueStatus: c.IssueStatus, Subject: c.Subject, From: c.From, Snippet: strings.TrimSpace(c.Snippet), State: conversationState(c),
			PendingSends: c.PendingSends, LastActivityAt: c.LastActivityAt, CreatedAt: c.CreatedAt}
		if c.AssigneeAgentID != "" {
			id := c.AssigneeAgentID
			cc.AssigneeAgentID = &id
		}
		out = append(out, cc)
	}
	httpx.WriteJSON(w, http.StatusOK, out)
	return nil
}
