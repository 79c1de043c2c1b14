package outbound

import (
	"context"
	"time"

	"github.com/paperclipai/paperclipai/internal/authz"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/email"
)

// ThreadMessage is one retained email in a thread summary (Bcc included,
// for board display).
type ThreadMessage struct {
	ID                string    `json:"id"`
	ProviderMessageID string    `json:"providerMessageId"`
	From              string    `json:"from"`
	To                []string  `json:"to"`
	Cc                []string  `json:"cc"`
	Bcc               []string  `json:"bcc"`
	ReplyTo           []string  `json:"replyTo"`
	Subject           string    `json:"subject"`
	Text              string    `json:"text"`
	FullText          string    `json:"fullText"`
	Direction         string    `json:"direction"`
	Automatic         bool      `json:"automatic"`
	Timestamp         time.Time `json:"timestamp"`
	AttachmentIDs     []string  `json:"attachmentIds"`
	CommentID         *string   `json:"commentId"`
}

// ThreadSummary is the email context of a bound task.
type ThreadSummary struct {
	ConversationID string                      `json:"conversationId"`
	IssueID        string                      `json:"issueId"`
	Endpoint       domain.EmailEndpointSummary `json:"endpoint"`
	Subject        string                      `json:"subject"`
	Messages       []ThreadMessage             `json:"messages"`
	Publications   []SendSummary               `json:"publications"`
	// Sends is Publications under the name new clients use ("send"):
	// the same list, both present.
	Sends []SendSummary `json:"sends"`
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// Thread returns the email thread bound to a task, or nil when the task has
// no email conversation. Agents must be able to read the task and own the
// inbox.
func (s *Service) Thread(ctx context.Context, a authz.Actor, companyID, issueID string) (*ThreadSummary, error) {
	if err := s.Email.RequireEnabled(ctx); err != nil {
		return nil, err
	}
	missing := notFound("Email task not found")
	task, err := s.Store.GetIssue(ctx, s.Store.DB, issueID)
	if err != nil || task.CompanyID != companyID {
		return nil, missing
	}
	if err := s.Authz.CanReadIssue(ctx, s.Store.DB, a, task); err != nil {
		return nil, err
	}
	conv, err := s.Store.ConversationByIssue(ctx, s.Store.DB, issueID)
	if isNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	ep, err := s.Store.GetEndpoint(ctx, s.Store.DB, conv.EndpointID)
	if err != nil {
		return nil, err
	}
	if a.Kind == authz.KindAgent {
		if ep.AssignedAgentID != a.AgentID() {
			return nil, missing
		}
		// An agent reads a thread only while it may act on it: the inbox
		// active and its credentials authorized, as for sending and for
		// the MCP tools (docs/agents.md, "Paused and disconnected inboxes").
		if err := s.agentMayRead(ctx, ep); err != nil {
			return nil, err
		}
	}
	msgs, err := s.Store.ListEmailMessages(ctx, s.Store.DB, conv.ID)
	if err != nil {
		return nil, err
	}
	pubs, err := s.Store.ListPublicationsByConversation(ctx, s.Store.DB, conv.ID)
	if err != nil {
		return nil, err
	}
	out := &ThreadSummary{ConversationID: conv.ID, IssueID: conv.IssueID, Endpoint: email.ForActor(a, s.Email.Summary(ctx, ep)), Subject: conv.Subject,
		Messages: []ThreadMessage{}, Publications: []SendSummary{}}
	for _, m := range msgs {
		tm := ThreadMessage{ID: m.ID, ProviderMessageID: m.ProviderMessageID, From: m.Envelope.From, To: nonNil(m.Envelope.To),
			Cc: nonNil(m.Envelope.Cc), Bcc: nonNil(m.Envelope.Bcc), ReplyTo: nonNil(m.Envelope.ReplyTo), Subject: m.Envelope.Subject,
			Text: m.Text, FullText: m.FullText, Direction: m.Direction, Automatic: m.Automatic, Timestamp: m.Timestamp,
			AttachmentIDs: nonNil(m.AttachmentIDs)}
		if a.Kind == authz.KindAgent {
			// Bcc is board metadata; agents replying never need it.
			tm.Bcc = []string{}
		}
		if m.CommentID != "" {
			c := m.CommentID
			tm.CommentID = &c
		}
		out.Messages = append(out.Messages, tm)
	}
	for _, p := range pubs {
		out.Publications = append(out.Publications, summarizeSend(p))
	}
	sums := make([]*SendSummary, len(out.Publications))
	for i := range out.Publications {
		sums[i] = &out.Publications[i]
	}
	if err := s.attachReviews(ctx, sums); err != nil {
		return nil, err
	}
	out.Sends = out.Publications
	return out, nil
}

// errThreadPaused is an agent's thread read of a paused inbox.
var errThreadPaused = &domain.Refusal{Kind: domain.KindConflict, Code: "inbox_paused",
	Message: "This email inbox is paused; its threads can be read again once a board user resumes it"}

// agentMayRead applies the active-inbox check to an agent's thread read.
func (s *Service) agentMayRead(ctx context.Context, ep domain.EmailEndpoint) error {
	if ep.Status == domain.EndpointPaused {
		return errThreadPaused
	}
	_, _, err := s.Email.ActiveEndpoint(ctx, s.Store.DB, ep.ID)
	return err
}

// SendStatus returns a send's summary (GET …/email/deliveries/{id}: the API
// calls a send's status its delivery). Agents must be able to read its task
// and own the inbox.
func (s *Service) SendStatus(ctx context.Context, a authz.Actor, companyID, pubID string) (SendSummary, error) {
	if err := s.Email.RequireEnabled(ctx); err != nil {
		return SendSummary{}, err
	}
	missing := notFound("Email delivery not found")
	pub, err := s.Store.GetPublication(ctx, s.Store.DB, pubID)
	if err != nil || pub.CompanyID != companyID {
		return SendSummary{}, missing
	}
	if _, err := s.Authz.CompanyAccess(ctx, s.Store.DB, a, companyID, false); err != nil {
		return SendSummary{}, err
	}
	task, err := s.Store.GetIssue(ctx, s.Store.DB, pub.IssueID)
	if err != nil {
		return SendSummary{}, missing
	}
	if err := s.Authz.CanReadIssue(ctx, s.Store.DB, a, task); err != nil {
		return SendSummary{}, err
	}
	if a.Kind == authz.KindAgent {
		ep, err := s.Store.GetEndpoint(ctx, s.Store.DB, pub.EndpointID)
		if err != nil || ep.AssignedAgentID != a.AgentID() {
			return SendSummary{}, missing
		}
	}
	out := summarizeSend(pub)
	if err := s.attachReviews(ctx, []*SendSummary{&out}); err != nil {
		return SendSummary{}, err
	}
	return out, nil
}

// RequireCompanyAccess checks a's access to a company: read, or write
// (the send routes' first check).
func (s *Service) RequireCompanyAccess(ctx context.Context, a authz.Actor, companyID string, write bool) error {
	_, err := s.Authz.CompanyAccess(ctx, s.Store.DB, a, companyID, write)
	return err
}

// TaskByIdentifier returns the id of the company's task with the short
// identifier ref (ACME-12), after a's read access to the company is
// checked, so an outsider cannot probe which identifiers exist.
func (s *Service) TaskByIdentifier(ctx context.Context, a authz.Actor, companyID, ref string) (string, error) {
	if err := s.RequireCompanyAccess(ctx, a, companyID, false); err != nil {
		return "", err
	}
	found, err := s.Store.IssuesByIdentifier(ctx, s.Store.DB, companyID, ref)
	if err != nil {
		return "", err
	}
	if len(found) == 0 {
		return "", notFound("Email task not found")
	}
	return found[0].ID, nil
}
