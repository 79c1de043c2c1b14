package email

import (
	"context"
	"sort"
	"strings"
	"time"

	"github.com/paperclipai/paperclipai/internal/authz"
	"github.com/paperclipai/paperclipai/internal/domain"
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

// ReadableInbox loads endpoint endpointID for an actor who may read it:
// company read access, and for an agent only the inbox assigned to it.
// Everything else is the same 404; an id that is not a UUID is invalid.
func (s *Service) ReadableInbox(ctx context.Context, a authz.Actor, endpointID string) (domain.EmailEndpoint, error) {
	notFound := domain.Refuse(domain.KindNotFound, "Email inbox not found")
	if err := checkID(endpointID, "endpointId"); err != nil {
		return domain.EmailEndpoint{}, err
	}
	ep, err := s.Store.GetEndpoint(ctx, s.Store.DB, endpointID)
	if err != nil {
		return ep, notFound
	}
	if _, err := s.Authz.CompanyAccess(ctx, s.Store.DB, a, ep.CompanyID, false); err != nil {
		return ep, notFound
	}
	if a.Kind == authz.KindAgent && ep.AssignedAgentID != a.AgentID() {
		return ep, notFound
	}
	return ep, nil
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

// InboxConversations returns a page of the conversations of ep (loaded
// with ReadableInbox), newest activity first, and the cursor of the next
// page.
func (s *Service) InboxConversations(ctx context.Context, ep domain.EmailEndpoint, p store.Page) ([]ConversationSummary, *store.Cursor, error) {
	rows, err := s.Store.ConversationsPage(ctx, s.Store.DB, ep.ID, p)
	if err != nil {
		return nil, nil, err
	}
	rows, next := store.TrimPage(rows, p, func(c store.ConversationRow) store.Cursor { return store.Cursor{At: c.LastActivityAt, ID: c.ID} })
	out := make([]ConversationSummary, 0, len(rows))
	for _, c := range rows {
		out = append(out, ConversationSummary{ID: c.ID, IssueID: c.IssueID, IssueTitle: c.IssueTitle, IssueStatus: c.IssueStatus,
			Subject: c.Subject, State: c.State, LastActivityAt: c.LastActivityAt, CreatedAt: c.CreatedAt})
	}
	return out, next, nil
}

// InboxActivity is an inbox's inbound queue and its recent deliveries and
// sends, newest first.
type InboxActivity struct {
	Queue InboxQueue     `json:"queue"`
	Items []ActivityItem `json:"items"`
	// NextCursor continues the items (null on the last page); the API
	// edge encodes it from InboxActivity's cursor.
	NextCursor *string `json:"nextCursor"`
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

// InboxActivity returns the queue of ep (loaded with ReadableInbox) and a
// page of its deliveries and sends, newest first, with the cursor of the
// next page (NextCursor is left to the caller, which encodes it).
func (s *Service) InboxActivity(ctx context.Context, ep domain.EmailEndpoint, p store.Page) (InboxActivity, *store.Cursor, error) {
	q, err := s.Store.EndpointDeliveryQueue(ctx, s.Store.DB, ep.ID)
	if err != nil {
		return InboxActivity{}, nil, err
	}
	// Both tables are paged on (time, id) from the same cursor: ids are
	// unique across them, so the merged order is total and the newest
	// Limit of the two pages are the newest Limit of the union.
	dels, err := s.Store.DeliveriesPage(ctx, s.Store.DB, ep.ID, p)
	if err != nil {
		return InboxActivity{}, nil, err
	}
	pubs, err := s.Store.PublicationsPage(ctx, s.Store.DB, ep.ID, p)
	if err != nil {
		return InboxActivity{}, nil, err
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
	for _, pub := range pubs {
		it := ActivityItem{Kind: "send", ID: pub.ID, Outcome: string(pub.Outcome), Error: optString(pub.Error), IssueID: optString(pub.IssueID),
			Attempts: pub.Attempts, At: pub.CreatedAt}
		if pub.Outcome == domain.OutcomeQueued || pub.Outcome == domain.OutcomeUncertain {
			it.NextAttemptAt = pub.NextAttemptAt
		}
		out.Items = append(out.Items, it)
	}
	sort.Slice(out.Items, func(i, j int) bool {
		a, b := out.Items[i], out.Items[j]
		if !a.At.Equal(b.At) {
			return a.At.After(b.At)
		}
		return a.ID > b.ID
	})
	var next *store.Cursor
	out.Items, next = store.TrimPage(out.Items, p, func(it ActivityItem) store.Cursor { return store.Cursor{At: it.At, ID: it.ID} })
	return out, next, nil
}

// ListInboxesPage returns a page of the company's inboxes the actor may
// see (ListInboxes' rules; archived ones for a board actor when asked),
// newest first, and the cursor of the next page.
func (s *Service) ListInboxesPage(ctx context.Context, a authz.Actor, companyID string, archived bool, p store.Page) ([]domain.EmailEndpointSummary, *store.Cursor, error) {
	if archived {
		if err := authz.RequireBoard(a); err != nil {
			return nil, nil, err
		}
	}
	if _, err := s.Authz.CompanyAccess(ctx, s.Store.DB, a, companyID, false); err != nil {
		return nil, nil, err
	}
	eps, err := s.Store.ListEndpointsPage(ctx, s.Store.DB, companyID, archived, p)
	if err != nil {
		return nil, nil, err
	}
	eps, next := store.TrimPage(eps, p, func(e domain.EmailEndpoint) store.Cursor { return store.Cursor{At: e.CreatedAt, ID: e.ID} })
	// Filtered after the page is cut, so the cursor continues after the
	// page's last row whatever the actor may see of it.
	visible := []domain.EmailEndpoint{}
	for _, ep := range eps {
		if a.Kind == authz.KindAgent {
			if ep.AssignedAgentID != a.AgentID() {
				continue
			}
			if _, _, err := s.ActiveEndpoint(ctx, s.Store.DB, ep.ID); err != nil {
				continue
			}
		}
		visible = append(visible, ep)
	}
	out := []domain.EmailEndpointSummary{}
	for _, sum := range s.Summaries(ctx, visible) {
		if !archived {
			sum = ForActor(a, sum)
		}
		out = append(out, sum)
	}
	return out, next, nil
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
// it; a send of it, or its task, waits for review; it was answered; else it is new.
func conversationState(c store.CompanyConversation) string {
	switch {
	case c.LastOutcome == string(domain.OutcomeFailed):
		return ConvDeliveryFailed
	case c.PendingSends > 0:
		return ConvReplyPending
	case c.ActiveRuns > 0:
		return ConvAgentWorking
	case c.LastOutcome == string(domain.OutcomeAwaitingReview) || c.IssueStatus == domain.IssueInReview:
		return ConvAwaitingReview
	case c.LastDirection == "outbound" || c.LastOutcome == string(domain.OutcomeSent) || c.LastOutcome == string(domain.OutcomeDelivered):
		return ConvReplied
	}
	return ConvNew
}

// CompanyConversations returns a page of the company's conversations
// across its inboxes (of one inbox when endpointID is set), newest
// activity first, for a board actor with company access, and the cursor
// of the next page (GET /api/companies/{companyId}/email/conversations).
func (s *Service) CompanyConversations(ctx context.Context, a authz.Actor, companyID, endpointID string, p store.Page) ([]CompanyConversation, *store.Cursor, error) {
	if err := authz.RequireBoard(a); err != nil {
		return nil, nil, err
	}
	if _, err := s.Authz.CompanyAccess(ctx, s.Store.DB, a, companyID, false); err != nil {
		return nil, nil, err
	}
	if endpointID != "" && !store.ValidID(endpointID) {
		return nil, nil, domain.Refuse(domain.KindInvalid, "endpointId must be a UUID")
	}
	rows, err := s.Store.ListCompanyConversations(ctx, s.Store.DB, companyID, endpointID, p)
	if err != nil {
		return nil, nil, err
	}
	rows, next := store.TrimPage(rows, p, func(c store.CompanyConversation) store.Cursor {
		return store.Cursor{At: c.LastActivityAt, ID: c.ID}
	})
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
	return out, next, nil
}
