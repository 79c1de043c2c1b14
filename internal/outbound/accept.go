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
func (s *Service) Accept(ctx context.Context, actor authz.Actor, companyID string, req SendRequest) (SendSummary, error) {
	var zero SendSummary
	if err := s.Email.RequireEnabled(ctx); err != nil {
		return zero, err
	}
	if err := req.Validate(); err != nil {
		return zero, err
	}
	a := email.SenderOf(actor)
	ep, err := s.Store.GetEndpoint(ctx, s.Store.DB, req.EndpointID)
	if err != nil && !isNotFound(err) {
		return zero, err
	}
	if err != nil || ep.CompanyID != companyID {
		return zero, notFound("Email inbox not found")
	}
	if _, _, err := s.Email.ActiveEndpoint(ctx, s.Store.DB, ep.ID); err != nil {
		return zero, err
	}
	var conv domain.EmailConversation
	var source domain.Issue
	if req.IsReply() {
		conv, err = s.Store.GetConversation(ctx, s.Store.DB, req.ConversationID)
		if err != nil && !isNotFound(err) {
			return zero, err
		}
		if err != nil || conv.EndpointID != ep.ID {
			return zero, notFound("Email conversation not found")
		}
		source, err = s.Store.GetIssue(ctx, s.Store.DB, conv.IssueID)
	} else {
		source, err = s.Store.GetIssue(ctx, s.Store.DB, req.ParentIssueID)
	}
	if isNotFound(err) {
		return zero, notFound("Task not found")
	}
	if err != nil {
		return zero, err
	}
	if err := s.Email.AuthorizeSend(ctx, s.Store.DB, a, ep, source, true); err != nil {
		return zero, err
	}
	dig := digest(req, a)
	if existing, err := s.Store.GetPublication(ctx, s.Store.DB, req.IdempotencyKey); err == nil {
		return s.replay(existing, companyID, dig)
	} else if !isNotFound(err) {
		return zero, err
	}
	// Recipients are known now for a new email, and from the retained
	// envelope for a reply; both feed the loop guards below.
	_, _, recipients, err := s.recipients(ctx, s.Store.DB, ep, req, conv.ID)
	if err != nil {
		return zero, err
	}
	// The inbox's send policy: a blocked recipient refuses the send before
	// anything is stored or counted; otherwise it may hold the send.
	pol, err := s.Store.GetSendPolicy(ctx, s.Store.DB, ep.ID)
	if err != nil {
		return zero, err
	}
	holdFor, err := s.holdReasons(ctx, ep, pol, lowerAll(recipients))
	if err != nil {
		return zero, err
	}
	atts, err := s.selectAttachments(ctx, companyID, source.ID, req.AttachmentIDs)
	if err != nil {
		return zero, err
	}
	if err := s.decide(ctx, actor, ep, conv, sendAction(req), recipients); err != nil {
		return zero, err
	}
	suppressed, err := s.Store.SuppressionsAmong(ctx, s.Store.DB, ep.ID, lowerAll(recipients))
	if err != nil {
		return zero, err
	}
	reqJSON, _ := json.Marshal(req)
	actorJSON, _ := json.Marshal(a)
	attJSON, _ := json.Marshal(atts)
	pub := store.EmailPublication{ID: req.IdempotencyKey, CompanyID: companyID, EndpointID: ep.ID, Request: reqJSON,
		Actor: actorJSON, Digest: dig, Attachments: attJSON}
	if len(suppressed) > 0 {
		// A permanently bounced recipient fails fast: recorded, never sent.
		pub.State, pub.Outcome = domain.SendFailed, domain.OutcomeFailed
		pub.Error = suppressedError(suppressed)
	} else if len(holdFor) > 0 {
		// Held: stored like any send, but the worker never takes it
		// (PendingSends wants queued or uncertain) until a reviewer
		// approves it.
		pub.Outcome = domain.OutcomeAwaitingReview
	}
	var replayed *store.EmailPublication
	var stored store.EmailPublication
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
			pub.ConversationID, pub.IssueID = conv.ID, conv.IssueID
		} else {
			child := domain.Issue{CompanyID: companyID, Title: *req.Subject, Description: "Email conversation from " + ep.Address,
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
			c := domain.EmailConversation{CompanyID: companyID, EndpointID: ep.ID, IssueID: child.ID, ExternalConversationID: ep.Address,
				ExternalThreadID: "pending:" + req.IdempotencyKey, Subject: *req.Subject, State: "waiting"}
			if _, err := s.Store.InsertConversation(ctx, tx, &c); err != nil {
				return err
			}
			pub.ConversationID, pub.IssueID = c.ID, child.ID
		}
		if err := s.Store.InsertPublication(ctx, tx, &pub); err != nil {
			return err
		}
		if pub.Outcome == domain.OutcomeAwaitingReview {
			rv := store.SendReview{PublicationID: pub.ID, CompanyID: companyID, EndpointID: ep.ID, Reasons: holdFor,
				ExpiresAt: s.Store.Now().Add(time.Duration(pol.ReviewExpiresHours) * time.Hour)}
			if err := s.Store.InsertSendReview(ctx, tx, &rv); err != nil {
				return err
			}
			if err := s.emit(ctx, tx, companyID, "email.review_requested", map[string]any{"publicationId": pub.ID, "endpointId": ep.ID,
				"issueId": pub.IssueID, "recipients": recipients, "reasons": holdFor, "expiresAt": rv.ExpiresAt}); err != nil {
				return err
			}
		}
		// Read the stored row inside the transaction: the answer shows the
		// accepted state, never what a worker woken by the commit (locally or
		// through the database notification) has done meanwhile.
		if stored, err = s.Store.GetPublication(ctx, tx, pub.ID); err != nil {
			return err
		}
		if pub.Outcome == domain.OutcomeQueued {
			if err := s.notifyTx(ctx, tx); err != nil {
				return err
			}
		}
		return s.Store.Audit(ctx, tx, actor.AuditActor(), companyID, "email.queued", "email_publication", pub.ID, map[string]any{"endpointId": ep.ID,
			"issueId": pub.IssueID, "reply": req.IsReply(), "recipients": len(recipients), "outcome": pub.Outcome})
	})
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
