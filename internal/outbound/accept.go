package outbound

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"strings"
	"time"

	"github.com/paperclipai/paperclipai/internal/authz"
	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/email"
	"github.com/paperclipai/paperclipai/internal/policy"
	"github.com/paperclipai/paperclipai/internal/store"
)

// AttachmentRef is an attachment as selected at acceptance; execution
// re-checks the bytes against Size and SHA256.
type AttachmentRef struct {
	ID          string `json:"id"`
	Filename    string `json:"filename"`
	ContentType string `json:"contentType"`
	SizeBytes   int64  `json:"sizeBytes"`
	SHA256      string `json:"sha256"`
}

// digest fingerprints {request, actor}: the same key with a different
// digest is a conflicting reuse.
func digest(req SendRequest, a email.Sender) string {
	b, _ := json.Marshal(struct {
		Input SendRequest  `json:"input"`
		Actor email.Sender `json:"actor"`
	}{req, a})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Accept validates, authorizes and durably queues a send or reply (docs/email-pipeline.md,
// "Acceptance"). No provider call happens here: the intent, and for a new
// conversation its child task and conversation, commit in one transaction
// and the worker sends later. A repeated key with identical content returns
// the same publication; with different content it is a 409.
//
// The steps, in the order a refusal is decided: load what the request
// names, authorize the sender, replay a known key, screen the recipients
// (policy, loop guards, suppressions), then commit the intent (intentTx).
func (s *Service) Accept(ctx context.Context, actor authz.Actor, companyID string, req SendRequest) (SendSummary, error) {
	var zero SendSummary
	if err := s.Email.RequireEnabled(ctx); err != nil {
		return zero, err
	}
	if req.ParentIssueID != "" {
		// The source task by its UUID or its identifier in this company.
		id, err := s.TaskRef(ctx, companyID, req.ParentIssueID)
		if err != nil {
			return zero, err
		}
		req.ParentIssueID = id
	}
	if err := req.Validate(); err != nil {
		return zero, err
	}
	a := email.SenderOf(actor)
	t, err := s.load(ctx, companyID, req)
	if err != nil {
		return zero, err
	}
	if err := s.Email.AuthorizeSend(ctx, s.Store.DB, a, t.ep, t.source, true); err != nil {
		return zero, err
	}
	dig := digest(req, a)
	if existing, err := s.Store.GetPublication(ctx, s.Store.DB, req.IdempotencyKey); err == nil {
		return s.replay(existing, companyID, dig)
	} else if !isNotFound(err) {
		return zero, err
	}
	p, err := s.screen(ctx, actor, companyID, req, t)
	if err != nil {
		return zero, err
	}
	pub := newPublication(companyID, req, a, dig, t, p)
	stored, replayed, err := s.intentTx(ctx, actor, a, req, t, p, &pub)
	if err != nil {
		return zero, err
	}
	if replayed != nil {
		return s.replay(*replayed, companyID, dig)
	}
	s.Metrics.Sends.WithLabelValues("accepted").Inc()
	if pub.Outcome == domain.OutcomeFailed {
		s.Metrics.Sends.WithLabelValues(string(domain.OutcomeFailed)).Inc()
	}
	s.Notify()
	s.notifyEvents()
	out := summarizeSend(stored)
	if pub.Outcome == domain.OutcomeAwaitingReview {
		if err := s.attachReviews(ctx, []*SendSummary{&out}); err != nil {
			return zero, err
		}
	}
	return out, nil
}

// sendTarget is what a send request names, loaded and checked: the inbox,
// for a reply its conversation, and the task the send is about (a new
// email's parent task, a reply's conversation task).
type sendTarget struct {
	ep     domain.EmailEndpoint
	conv   domain.EmailConversation
	source domain.Issue
}

// load reads what req names and refuses what the company does not have:
// the inbox (which must be active), a reply's conversation in that inbox,
// and the source task.
func (s *Service) load(ctx context.Context, companyID string, req SendRequest) (sendTarget, error) {
	var t sendTarget
	ep, err := s.Store.GetEndpoint(ctx, s.Store.DB, req.EndpointID)
	if err != nil && !isNotFound(err) {
		return t, err
	}
	if err != nil || ep.CompanyID != companyID {
		return t, notFound("Email inbox not found")
	}
	if _, _, err := s.Email.ActiveEndpoint(ctx, s.Store.DB, ep.ID); err != nil {
		return t, err
	}
	t.ep = ep
	if req.IsReply() {
		t.conv, err = s.Store.GetConversation(ctx, s.Store.DB, req.ConversationID)
		if err != nil && !isNotFound(err) {
			return t, err
		}
		if err != nil || t.conv.EndpointID != ep.ID {
			return t, notFound("Email conversation not found")
		}
		t.source, err = s.Store.GetIssue(ctx, s.Store.DB, t.conv.IssueID)
	} else {
		t.source, err = s.Store.GetIssue(ctx, s.Store.DB, req.ParentIssueID)
	}
	if isNotFound(err) {
		return t, notFound("Task not found")
	}
	return t, err
}

// sendPlan is what screening decided about a send: who it goes to, the
// inbox's send policy and why it is held (none: it goes out at once), the
// attachments selected, and the suppressed recipients that fail it at
// once.
type sendPlan struct {
	recipients []string
	policy     store.SendPolicy
	holdFor    []string
	atts       []AttachmentRef
	suppressed []store.Suppression
}

// screen decides whether and how the send may go: its recipients (known
// now for a new email, from the retained envelope for a reply), the
// inbox's send policy (a blocked recipient refuses the send before
// anything is stored or counted; otherwise it may hold the send), the
// attachments, the action policy and loop guards, and the suppression
// list.
func (s *Service) screen(ctx context.Context, actor authz.Actor, companyID string, req SendRequest, t sendTarget) (sendPlan, error) {
	var p sendPlan
	var err error
	if _, _, p.recipients, err = s.recipients(ctx, s.Store.DB, t.ep, req, t.conv.ID); err != nil {
		return p, err
	}
	if p.policy, err = s.Store.GetSendPolicy(ctx, s.Store.DB, t.ep.ID); err != nil {
		return p, err
	}
	if p.holdFor, err = s.holdReasons(ctx, t.ep, p.policy, lowerAll(p.recipients)); err != nil {
		return p, err
	}
	if p.atts, err = s.selectAttachments(ctx, companyID, t.source.ID, req.AttachmentIDs); err != nil {
		return p, err
	}
	if err := s.decide(ctx, actor, t.ep, t.conv, sendAction(req), p.recipients); err != nil {
		return p, err
	}
	p.suppressed, err = s.Store.SuppressionsAmong(ctx, s.Store.DB, t.ep.ID, lowerAll(p.recipients))
	return p, err
}

// newPublication is the intent row of an accepted send: queued, failed at
// once for a suppressed recipient, or awaiting review when held.
func newPublication(companyID string, req SendRequest, a email.Sender, dig string, t sendTarget, p sendPlan) store.EmailPublication {
	reqJSON, _ := json.Marshal(req)
	actorJSON, _ := json.Marshal(a)
	attJSON, _ := json.Marshal(p.atts)
	pub := store.EmailPublication{ID: req.IdempotencyKey, CompanyID: companyID, EndpointID: t.ep.ID, Request: reqJSON,
		Actor: actorJSON, Digest: dig, Attachments: attJSON}
	if len(p.suppressed) > 0 {
		// A permanently bounced recipient fails fast: recorded, never sent.
		pub.State, pub.Outcome = domain.SendFailed, domain.OutcomeFailed
		pub.Error = suppressedError(p.suppressed)
	} else if len(p.holdFor) > 0 {
		// Held: stored like any send, but the worker never takes it
		// (PendingSends wants queued or uncertain) until a reviewer
		// approves it.
		pub.Outcome = domain.OutcomeAwaitingReview
	}
	return pub
}

// intentTx commits pub in one transaction under the key's advisory lock:
// for a new email its child task and conversation, for a held send its
// review (and the review_requested event), the cross-replica signal for a
// queued one, and the audit entry. A concurrent acceptance of the same
// key that committed first is returned as replayed instead. stored is the
// row as committed.
func (s *Service) intentTx(ctx context.Context, actor authz.Actor, a email.Sender, req SendRequest, t sendTarget, p sendPlan,
	pub *store.EmailPublication) (stored store.EmailPublication, replayed *store.EmailPublication, err error) {
	companyID, ep := pub.CompanyID, t.ep
	err = s.Store.Tx(ctx, func(tx *sql.Tx) error {
		if err := s.Store.DB.AdvisoryXactLock(ctx, tx, "email-send:"+req.IdempotencyKey); err != nil {
			return err
		}
		if existing, err := s.Store.GetPublication(ctx, tx, req.IdempotencyKey); err == nil {
			replayed = &existing
			return nil
		} else if !isNotFound(err) {
			return err
		}
		if req.IsReply() {
			pub.ConversationID, pub.IssueID = t.conv.ID, t.conv.IssueID
		} else if err := s.newConversationTx(ctx, tx, a, req, t, pub); err != nil {
			return err
		}
		if err := s.Store.InsertPublication(ctx, tx, pub); err != nil {
			return err
		}
		if pub.Outcome == domain.OutcomeAwaitingReview {
			rv := store.SendReview{PublicationID: pub.ID, CompanyID: companyID, EndpointID: ep.ID, Reasons: p.holdFor,
				ExpiresAt: s.Store.Now().Add(time.Duration(p.policy.ReviewExpiresHours) * time.Hour)}
			if err := s.Store.InsertSendReview(ctx, tx, &rv); err != nil {
				return err
			}
			if err := s.emit(ctx, tx, companyID, "email.review_requested", map[string]any{"publicationId": pub.ID, "sendId": pub.ID, "endpointId": ep.ID,
				"issueId": pub.IssueID, "recipients": p.recipients, "reasons": p.holdFor, "expiresAt": rv.ExpiresAt}); err != nil {
				return err
			}
		}
		// Read the stored row inside the transaction: the answer shows the
		// accepted state, never what a worker woken by the commit (locally or
		// through the database notification) has done meanwhile.
		var err error
		if stored, err = s.Store.GetPublication(ctx, tx, pub.ID); err != nil {
			return err
		}
		if pub.Outcome == domain.OutcomeQueued {
			if err := s.notifyTx(ctx, tx); err != nil {
				return err
			}
		}
		return s.Store.Audit(ctx, tx, actor.AuditActor(), companyID, "email.queued", "email_publication", pub.ID, map[string]any{"endpointId": ep.ID,
			"issueId": pub.IssueID, "reply": req.IsReply(), "recipients": len(p.recipients), "outcome": pub.Outcome})
	})
	return stored, replayed, err
}

// newConversationTx creates a new email's child task of the source task
// and its conversation (its thread id pending until the provider answers),
// and binds pub to them.
func (s *Service) newConversationTx(ctx context.Context, tx *sql.Tx, a email.Sender, req SendRequest, t sendTarget, pub *store.EmailPublication) error {
	ep, source := t.ep, t.source
	child := domain.Issue{CompanyID: pub.CompanyID, Title: *req.Subject, Description: "Email conversation from " + ep.Address,
		Status: domain.IssueTodo, Priority: "medium", AssigneeAgentID: ep.AssignedAgentID, ParentID: source.ID,
		ProjectID: source.ProjectID, ExecutionWorkspaceSettings: source.ExecutionWorkspaceSettings,
		ResponsibleUserID: ep.SponsorUserID, OriginKind: "chat_channel", OriginID: "email-send:" + req.IdempotencyKey,
		IdempotencyKey: "email-send:" + req.IdempotencyKey}
	if a.UserID != "" {
		child.CreatedByUserID = a.UserID
	} else {
		child.CreatedByAgentID = a.AgentID
	}
	if _, err := s.Store.CreateIssue(ctx, tx, &child); err != nil {
		return err
	}
	c := domain.EmailConversation{CompanyID: pub.CompanyID, EndpointID: ep.ID, IssueID: child.ID, ExternalConversationID: ep.Address,
		ExternalThreadID: "pending:" + req.IdempotencyKey, Subject: *req.Subject, State: "waiting"}
	if _, err := s.Store.InsertConversation(ctx, tx, &c); err != nil {
		return err
	}
	pub.ConversationID, pub.IssueID = c.ID, child.ID
	return nil
}

func (s *Service) replay(existing store.EmailPublication, companyID, dig string) (SendSummary, error) {
	if existing.CompanyID != companyID || existing.Digest != dig {
		return SendSummary{}, conflict("Email idempotency key was reused with different content")
	}
	return summarizeSend(existing), nil
}

func lowerAll(in []string) []string {
	out := make([]string, len(in))
	for i, a := range in {
		out[i] = strings.ToLower(addressOf(a))
	}
	return out
}

// decide applies the company's action policy for the send and the built-in
// loop-guard caps (per thread and per recipient). The decisions commit (they
// are audited, and allowed uses count against the caps) even when one of
// them refuses the send.
func (s *Service) decide(ctx context.Context, actor authz.Actor, ep domain.EmailEndpoint, conv domain.EmailConversation, action string, recipients []string) error {
	var refused error
	err := s.Store.Tx(ctx, func(tx *sql.Tx) error {
		d, err := s.Policy.Decide(ctx, tx, ep.CompanyID, actor, action)
		if err != nil {
			return err
		}
		if refused = refusal(d); refused != nil {
			return nil
		}
		if conv.ID != "" {
			if d, err = s.Policy.Limit(ctx, tx, ep.CompanyID, actor, ActionThreadCap, conv.ID, DefaultThreadCap, DefaultCapWindow); err != nil {
				return err
			}
			if refused = refusal(d); refused != nil {
				return nil
			}
		}
		for _, r := range lowerAll(recipients) {
			if d, err = s.Policy.Limit(ctx, tx, ep.CompanyID, actor, ActionRecipientCap, ep.ID+":"+r, DefaultRecipCap, DefaultCapWindow); err != nil {
				return err
			}
			if refused = refusal(d); refused != nil {
				return nil
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return refused
}

func refusal(d policy.Decision) error {
	if d.Allowed {
		return nil
	}
	if d.RateLimited {
		return &domain.Refusal{Kind: domain.KindRateLimited, Code: "email_rate_limited", RetryAfter: d.RetryAfter,
			Message: "Email send limit reached: " + d.Reason + ". Try again later."}
	}
	return &domain.Refusal{Kind: domain.KindForbidden, Code: "action_policy_denied", Message: "Action policy denied this email: " + d.Reason}
}

// selectAttachments checks every attachment belongs to the company and the
// source task and records its size and digest.
func (s *Service) selectAttachments(ctx context.Context, companyID, sourceIssueID string, ids []string) ([]AttachmentRef, error) {
	out := []AttachmentRef{}
	for _, id := range ids {
		att, err := s.Store.GetAttachment(ctx, s.Store.DB, id)
		if err != nil && !isNotFound(err) {
			return nil, err
		}
		if err != nil || att.CompanyID != companyID || att.IssueID != sourceIssueID {
			return nil, forbidden("Email attachments must belong to the source task")
		}
		if att.SizeBytes > s.Attachments.MaxBytes {
			return nil, badRequest("attachment %s exceeds the size bound", att.Filename)
		}
		out = append(out, AttachmentRef{ID: att.ID, Filename: att.Filename, ContentType: att.ContentType, SizeBytes: att.SizeBytes, SHA256: att.SHA256})
	}
	return out, nil
}

// sendAction is the action-policy name of a send request.
func sendAction(req SendRequest) string {
	if req.IsReply() {
		return "email.reply"
	}
	return "email.send"
}

// recipients resolves who a send goes to: for a new email its To, Cc and
// Bcc; for a reply, from the retained envelope of the message it answers
// (ReplyRecipients), which must be in the conversation. all is every
// recipient, for the loop guards. A refusal is a *domain.Refusal.
func (s *Service) recipients(ctx context.Context, q db.Querier, ep domain.EmailEndpoint, req SendRequest, conversationID string) (to, cc, all []string, err error) {
	if !req.IsReply() {
		return req.To, req.Cc, append(append(append([]string{}, req.To...), req.Cc...), req.Bcc...), nil
	}
	target, err := s.Store.EmailMessageByProviderID(ctx, q, ep.ID, req.ReplyToMessageID)
	if err != nil && !isNotFound(err) {
		return nil, nil, nil, err
	}
	if err != nil || target.ConversationID != conversationID {
		return nil, nil, nil, badRequest("Reply target is not in this inbox conversation")
	}
	to, cc = ReplyRecipients(target.Envelope.From, target.Envelope.To, target.Envelope.Cc, target.Envelope.ReplyTo, ep.Address, *req.ReplyAll)
	if len(to) == 0 {
		return nil, nil, nil, badRequest("The reply has no external recipient")
	}
	return to, cc, append(to, cc...), nil
}
