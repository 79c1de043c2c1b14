package outbound

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/paperclipai/paperclipai/internal/authz"
	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/heartbeat"
	"github.com/paperclipai/paperclipai/internal/store"
)

// HeldMessage is the one line every agent-facing surface (API, MCP tools,
// CLI, skill) shows for a held send.
const HeldMessage = "A person will review this email before it is sent; do not send it again."

// Waker records an agent wake inside a transaction (the heartbeat
// scheduler) and tells the scheduler after commit.
type Waker interface {
	WakeupTx(ctx context.Context, tx *sql.Tx, agentID string, req heartbeat.WakeRequest) (domain.Run, bool, error)
	Notify()
}

// Events records company notification events inside a transaction, so an
// event is delivered if and only if the change it reports commits.
type Events interface {
	EmitTx(ctx context.Context, tx *sql.Tx, companyID, event string, data map[string]any) error
	// Notify wakes the local delivery loop after the commit.
	Notify()
}

// emit records a notification event when an emitter is configured.
func (s *Service) emit(ctx context.Context, tx *sql.Tx, companyID, event string, data map[string]any) error {
	if s.Events == nil {
		return nil
	}
	return s.Events.EmitTx(ctx, tx, companyID, event, data)
}

// notifyEvents wakes the notification delivery loop after a commit that
// may have emitted events.
func (s *Service) notifyEvents() {
	if s.Events != nil {
		s.Events.Notify()
	}
}

// ReviewInput is a reviewer's decision on a held send: approve (with
// optional edits) or reject with a reason.
type ReviewInput struct {
	Action  string    `json:"action"`
	Text    *string   `json:"text,omitempty"`
	Subject *string   `json:"subject,omitempty"`
	To      *[]string `json:"to,omitempty"`
	Cc      *[]string `json:"cc,omitempty"`
	Reason  string    `json:"reason,omitempty"`
}

// ApprovedVersion is what a reviewer changed before approving; empty
// fields keep the agent's version. For a reply, To/Cc replace the
// recipients computed from the answered message.
type ApprovedVersion struct {
	Subject *string  `json:"subject,omitempty"`
	Text    *string  `json:"text,omitempty"`
	To      []string `json:"to,omitempty"`
	Cc      []string `json:"cc,omitempty"`
}

// ReviewView is the review part of a send's summary: why it was held, until
// when, and who decided what.
type ReviewView struct {
	Status    string     `json:"status"`
	Reasons   []string   `json:"reasons"`
	ExpiresAt time.Time  `json:"expiresAt"`
	HeldAt    time.Time  `json:"heldAt"`
	DecidedBy *string    `json:"decidedByUserId"`
	DecidedAt *time.Time `json:"decidedAt"`
	Reason    *string    `json:"reason"`
	// Changes lists the edited fields with their original and approved
	// values (null: approved as written).
	Changes json.RawMessage `json:"changes"`
}

func reviewView(r store.SendReview) *ReviewView {
	v := &ReviewView{Status: r.Status, Reasons: nonNilSlice(r.Reasons), ExpiresAt: r.ExpiresAt, HeldAt: r.CreatedAt, DecidedAt: r.DecidedAt,
		DecidedBy: optional(r.DecidedByUserID), Reason: optional(r.DecisionReason), Changes: r.Changes}
	return v
}

func nonNilSlice(in []string) []string {
	if in == nil {
		return []string{}
	}
	return in
}

// attachReviews adds each held-or-reviewed send's review to its summary
// (one query for the lot).
func (s *Service) attachReviews(ctx context.Context, sums []*SendSummary) error {
	ids := make([]string, 0, len(sums))
	for _, x := range sums {
		ids = append(ids, x.ID)
	}
	rs, err := s.Store.SendReviewsFor(ctx, s.Store.DB, ids)
	if err != nil {
		return err
	}
	for _, x := range sums {
		if r, ok := rs[x.ID]; ok {
			x.Review = reviewView(r)
		}
	}
	return nil
}

// reviewAccess allows owners, admins and members of the send's company to
// review; viewers and agents never.
func (s *Service) reviewAccess(ctx context.Context, a authz.Actor, companyID string) error {
	if err := authz.RequireBoard(a); err != nil {
		return domain.RefuseCode(domain.KindForbidden, "review_forbidden", "Only a person may review an email")
	}
	acc, err := s.Authz.CompanyAccess(ctx, s.Store.DB, a, companyID, true)
	if err != nil {
		return err
	}
	if err := authz.RequireRole(acc, domain.RoleOwner, domain.RoleAdmin, domain.RoleMember); err != nil {
		return domain.RefuseCode(domain.KindForbidden, "review_forbidden", "Viewers may not review emails")
	}
	return nil
}

// AwaitingReviewCount is the number of the company's sends awaiting
// review, for its reviewers (owners, admins and members).
func (s *Service) AwaitingReviewCount(ctx context.Context, a authz.Actor, companyID string) (int, error) {
	if err := s.reviewAccess(ctx, a, companyID); err != nil {
		return 0, err
	}
	return s.Store.CountCompanyHeldSends(ctx, s.Store.DB, companyID)
}

// notAwaiting is the 409 for a decision on a send no longer held.
func notAwaiting(outcome domain.SendOutcome) error {
	return &domain.Refusal{Kind: domain.KindConflict, Code: "not_awaiting_review",
		Message: "This email is no longer awaiting review (" + string(outcome) + "); nothing was sent", Details: map[string]any{"outcome": outcome}}
}

// Review applies a reviewer's decision to a held send (docs/email-pipeline.md,
// "Review before send"). Approval moves the send to queued in one
// transaction with the decision: from there the worker sends it like any
// other send, with the send's id as the provider idempotency key, so a
// crash anywhere after the commit still sends it exactly once. A second
// decision finds the review decided and answers 409 with the outcome.
func (s *Service) Review(ctx context.Context, a authz.Actor, companyID, pubID string, in ReviewInput) (SendSummary, error) {
	var zero SendSummary
	if err := s.reviewAccess(ctx, a, companyID); err != nil {
		return zero, err
	}
	pub, err := s.Store.GetPublication(ctx, s.Store.DB, pubID)
	if err != nil && !isNotFound(err) {
		return zero, err
	}
	if err != nil || pub.CompanyID != companyID {
		return zero, notFound("Email delivery not found")
	}
	var req SendRequest
	if err := json.Unmarshal(pub.Request, &req); err != nil {
		return zero, fmt.Errorf("decode send request: %w", err)
	}
	in.Reason = strings.TrimSpace(in.Reason)
	switch in.Action {
	case "approve":
		if in.Reason != "" {
			return zero, badRequest("reason is for reject; approve takes text, subject, to and cc edits")
		}
	case "reject":
		if in.Text != nil || in.Subject != nil || in.To != nil || in.Cc != nil {
			return zero, badRequest("reject takes only a reason")
		}
		if in.Reason == "" || len(in.Reason) > 2000 {
			return zero, badRequest("reject requires a reason (at most 2000 characters)")
		}
	default:
		return zero, badRequest("action must be approve or reject")
	}
	if pub.Outcome != domain.OutcomeAwaitingReview {
		return zero, notAwaiting(pub.Outcome)
	}
	if in.Action == "reject" {
		return s.finishReview(ctx, a, pub, "rejected", in.Reason)
	}
	version, changes, err := s.editedVersion(ctx, pub, req, in)
	if err != nil {
		return zero, err
	}
	return s.approve(ctx, a, pub, version, changes)
}

// editedVersion validates a reviewer's edits against the send rules and
// the inbox's blocked list, and returns the approved version (nil when
// nothing changed) with the changes for the send's history.
func (s *Service) editedVersion(ctx context.Context, pub store.EmailPublication, req SendRequest, in ReviewInput) (*ApprovedVersion, map[string]any, error) {
	if in.Text == nil && in.Subject == nil && in.To == nil && in.Cc == nil {
		return nil, nil, nil
	}
	ep, err := s.Store.GetEndpoint(ctx, s.Store.DB, pub.EndpointID)
	if err != nil {
		return nil, nil, err
	}
	origTo, origCc, _, err := s.recipients(ctx, s.Store.DB, ep, req, pub.ConversationID)
	if err != nil {
		return nil, nil, err
	}
	// Validate the edited version through the send request rules: a new
	// email with the edited fields must be a valid new email.
	check := SendRequest{EndpointID: req.EndpointID, ParentIssueID: store.NewID(), IdempotencyKey: req.IdempotencyKey,
		To: origTo, Cc: origCc, Subject: req.Subject, Text: req.Text}
	if req.IsReply() {
		subj := "reply"
		check.Subject = &subj
		if in.Subject != nil {
			return nil, nil, badRequest("A reply's subject follows its thread and cannot be edited")
		}
	}
	v := &ApprovedVersion{}
	changes := map[string]any{}
	if in.Text != nil {
		check.Text, v.Text = *in.Text, in.Text
	}
	if in.Subject != nil {
		check.Subject, v.Subject = in.Subject, in.Subject
	}
	if in.To != nil {
		check.To = *in.To
	}
	if in.Cc != nil {
		check.Cc = *in.Cc
	}
	if err := check.Validate(); err != nil {
		return nil, nil, err
	}
	if in.Text != nil && check.Text != req.Text {
		t := check.Text
		v.Text = &t
		changes["text"] = map[string]any{"from": req.Text, "to": t}
	} else {
		v.Text = nil
	}
	if in.Subject != nil && req.Subject != nil && *check.Subject != *req.Subject {
		subj := *check.Subject
		v.Subject = &subj
		changes["subject"] = map[string]any{"from": *req.Subject, "to": subj}
	} else {
		v.Subject = nil
	}
	if (in.To != nil || in.Cc != nil) && (!slices.Equal(check.To, origTo) || !slices.Equal(check.Cc, origCc)) {
		v.To, v.Cc = check.To, check.Cc
		if len(v.To) == 0 {
			return nil, nil, badRequest("The approved email needs at least one To recipient")
		}
		changes["to"] = map[string]any{"from": nonNilSlice(origTo), "to": nonNilSlice(v.To)}
		changes["cc"] = map[string]any{"from": nonNilSlice(origCc), "to": nonNilSlice(v.Cc)}
		pol, err := s.Store.GetSendPolicy(ctx, s.Store.DB, ep.ID)
		if err != nil {
			return nil, nil, err
		}
		for _, r := range lowerAll(append(append([]string{}, v.To...), v.Cc...)) {
			if MatchesRecipient(pol.BlockedRecipients, r) {
				return nil, nil, recipientBlocked(r)
			}
		}
	}
	if len(changes) == 0 {
		return nil, nil, nil
	}
	return v, changes, nil
}

// approve commits an approval: the review decided, the send queued (with
// the approved version when edited), its recipients remembered, audited,
// and the send workers of every replica signalled.
func (s *Service) approve(ctx context.Context, a authz.Actor, pub store.EmailPublication, v *ApprovedVersion, changes map[string]any) (SendSummary, error) {
	var zero SendSummary
	var versionJSON, changesJSON json.RawMessage
	if v != nil {
		versionJSON, _ = json.Marshal(v)
		changesJSON, _ = json.Marshal(changes)
	}
	ep, err := s.Store.GetEndpoint(ctx, s.Store.DB, pub.EndpointID)
	if err != nil {
		return zero, err
	}
	var req SendRequest
	_ = json.Unmarshal(pub.Request, &req)
	_, _, recipients, err := s.effectiveRecipients(ctx, s.Store.DB, ep, pub, req, v)
	if err != nil {
		return zero, err
	}
	var conflict error
	var review store.SendReview
	err = s.Store.Tx(ctx, func(tx *sql.Tx) error {
		if err := s.Store.DB.AdvisoryXactLock(ctx, tx, "email-send:"+pub.ID); err != nil {
			return err
		}
		ok, err := s.Store.DecideSendReview(ctx, tx, pub.ID, "approved", a.UserID, "", changesJSON)
		if err != nil {
			return err
		}
		if !ok {
			cur, err := s.Store.GetPublication(ctx, tx, pub.ID)
			if err != nil {
				return err
			}
			conflict = notAwaiting(cur.Outcome)
			return nil
		}
		if changed, err := s.setOutcome(ctx, tx, pub.ID, domain.OutcomeQueued, domain.OutcomeAwaitingReview); err != nil {
			return err
		} else if !changed {
			return fmt.Errorf("approve send %s: outcome no longer awaiting review", pub.ID)
		}
		if v != nil {
			if err := s.Store.SetApprovedRequest(ctx, tx, pub.ID, versionJSON); err != nil {
				return err
			}
		}
		if err := s.Store.RememberRecipients(ctx, tx, pub.EndpointID, lowerAll(recipients), "approved"); err != nil {
			return err
		}
		if review, err = s.Store.GetSendReview(ctx, tx, pub.ID); err != nil {
			return err
		}
		if err := s.notifyTx(ctx, tx); err != nil {
			return err
		}
		details := map[string]any{"endpointId": pub.EndpointID, "issueId": pub.IssueID, "edited": v != nil}
		if v != nil {
			details["changes"] = changes
		}
		return s.Store.Audit(ctx, tx, a.AuditActor(), pub.CompanyID, "email.review_approved", "email_publication", pub.ID, details)
	})
	if err != nil {
		return zero, err
	}
	if conflict != nil {
		return zero, conflict
	}
	s.Metrics.ReviewWait.WithLabelValues("approved").Observe(max(s.Store.Now().Sub(review.CreatedAt), 0).Seconds())
	s.Notify()
	return s.summaryWithReview(ctx, pub.ID)
}

// finishReview ends a held send without sending it: rejected by a reviewer
// (a) or expired (status "expired", a is the system). The send's task
// gets a comment quoting the reason and its agent is woken, so it can
// adjust; a concurrent decision that won answers 409.
func (s *Service) finishReview(ctx context.Context, a authz.Actor, pub store.EmailPublication, status, reason string) (SendSummary, error) {
	var zero SendSummary
	outcome := domain.OutcomeRejected
	errMsg := "A reviewer rejected this email: " + reason
	if status == "expired" {
		outcome = domain.OutcomeExpired
		errMsg = "Nobody reviewed this email in time; it was not sent"
	}
	var conflict error
	var review store.SendReview
	woke := false
	err := s.Store.Tx(ctx, func(tx *sql.Tx) error {
		if err := s.Store.DB.AdvisoryXactLock(ctx, tx, "email-send:"+pub.ID); err != nil {
			return err
		}
		ok, err := s.Store.DecideSendReview(ctx, tx, pub.ID, status, a.UserID, reason, nil)
		if err != nil {
			return err
		}
		if !ok {
			cur, err := s.Store.GetPublication(ctx, tx, pub.ID)
			if err != nil {
				return err
			}
			conflict = notAwaiting(cur.Outcome)
			return nil
		}
		if err := s.Store.SetPublicationState(ctx, tx, pub.ID, domain.SendFailed, errMsg, nil); err != nil {
			return err
		}
		if _, err := s.setOutcome(ctx, tx, pub.ID, outcome, domain.OutcomeAwaitingReview); err != nil {
			return err
		}
		if review, err = s.Store.GetSendReview(ctx, tx, pub.ID); err != nil {
			return err
		}
		if woke, err = s.wakeAfterReview(ctx, tx, pub, status, reason); err != nil {
			return err
		}
		if status == "expired" {
			if err := s.emit(ctx, tx, pub.CompanyID, "email.review_expired", map[string]any{"publicationId": pub.ID, "sendId": pub.ID,
				"endpointId": pub.EndpointID, "issueId": pub.IssueID}); err != nil {
				return err
			}
		}
		return s.Store.Audit(ctx, tx, a.AuditActor(), pub.CompanyID, "email.review_"+status, "email_publication", pub.ID,
			map[string]any{"endpointId": pub.EndpointID, "issueId": pub.IssueID, "reason": reason})
	})
	if err != nil {
		return zero, err
	}
	if conflict != nil {
		return zero, conflict
	}
	s.Metrics.ReviewWait.WithLabelValues(status).Observe(max(s.Store.Now().Sub(review.CreatedAt), 0).Seconds())
	if woke && s.Wake != nil {
		s.Wake.Notify()
	}
	s.notifyEvents()
	return s.summaryWithReview(ctx, pub.ID)
}

// wakeAfterReview writes the system comment on the send's task that quotes
// the reviewer's reason (or the expiry) and wakes the task's agent on it.
// The wake's key is the send's, so the decision wakes at most once.
func (s *Service) wakeAfterReview(ctx context.Context, tx *sql.Tx, pub store.EmailPublication, status, reason string) (bool, error) {
	task, err := s.Store.GetIssue(ctx, tx, pub.IssueID)
	if err != nil {
		return false, err
	}
	var req SendRequest
	_ = json.Unmarshal(pub.Request, &req)
	what := "your reply"
	if req.Subject != nil {
		what = fmt.Sprintf("your email %q", *req.Subject)
	}
	body := fmt.Sprintf("A reviewer rejected %s; it was not sent. Their reason:\n\n> %s\n\nAdjust and, if still appropriate, send a new email.",
		what, strings.ReplaceAll(reason, "\n", "\n> "))
	if status == "expired" {
		body = fmt.Sprintf("Nobody reviewed %s in time, so it expired and was not sent. If it is still needed, send a new email.", what)
	}
	c := domain.Comment{CompanyID: pub.CompanyID, IssueID: task.ID, Body: body, AuthorKind: "system"}
	if err := s.Store.CreateComment(ctx, tx, &c); err != nil {
		return false, err
	}
	if s.Wake == nil || task.AssigneeAgentID == "" {
		return false, nil
	}
	payload, _ := json.Marshal(map[string]any{"issueId": task.ID, "commentId": c.ID, "publicationId": pub.ID, "sendId": pub.ID, "review": status})
	snapshot, _ := json.Marshal(map[string]any{"issueId": task.ID, "wakeCommentId": c.ID, "emailPublicationId": pub.ID,
		"emailReview": status, "emailReviewReason": reason})
	_, _, err = s.Wake.WakeupTx(ctx, tx, task.AssigneeAgentID, heartbeat.WakeRequest{
		Source: "automation", Reason: "email_review_" + status, IdempotencyKey: "email-review:" + pub.ID,
		IssueID: task.ID, CommentID: c.ID, Payload: payload, ContextSnapshot: snapshot,
		IssueStateGuard: &domain.IssueStateGuard{IssueID: task.ID, Statuses: []string{domain.IssueTodo, domain.IssueInProgress,
			domain.IssueBlocked, domain.IssueInReview}, RequireAssignment: true},
		RequestedByKind: "system", RequestedByID: "email-review",
	})
	if err != nil {
		return false, err
	}
	return true, nil
}

// effectiveRecipients are the recipients a send goes to: the approved
// version's when a reviewer edited them, else the request's own. Inside a
// transaction q must be that transaction: SQLite has one connection, so
// a read through the pool would wait for the transaction forever.
func (s *Service) effectiveRecipients(ctx context.Context, q db.Querier, ep domain.EmailEndpoint, pub store.EmailPublication, req SendRequest, v *ApprovedVersion) (to, cc, all []string, err error) {
	if v != nil && len(v.To) > 0 {
		to, cc = v.To, v.Cc
		bcc := []string{}
		if !req.IsReply() {
			bcc = req.Bcc
		}
		return to, cc, append(append(append([]string{}, to...), cc...), bcc...), nil
	}
	return s.recipients(ctx, q, ep, req, pub.ConversationID)
}

// approvedVersion decodes a send's approved version (nil: none).
func approvedVersion(pub store.EmailPublication) (*ApprovedVersion, error) {
	if len(pub.ApprovedRequest) == 0 {
		return nil, nil
	}
	var v ApprovedVersion
	if err := json.Unmarshal(pub.ApprovedRequest, &v); err != nil {
		return nil, fmt.Errorf("decode approved version: %w", err)
	}
	return &v, nil
}

// summaryWithReview reads a send's summary with its review.
func (s *Service) summaryWithReview(ctx context.Context, id string) (SendSummary, error) {
	pub, err := s.Store.GetPublication(ctx, s.Store.DB, id)
	if err != nil {
		return SendSummary{}, err
	}
	out := summarizeSend(pub)
	if err := s.attachReviews(ctx, []*SendSummary{&out}); err != nil {
		return SendSummary{}, err
	}
	return out, nil
}

// expireReviews ends the held sends whose review expired; it returns when
// the next one expires (zero: none held).
func (w *Worker) expireReviews(ctx context.Context) (time.Time, error) {
	now := w.Store.Now()
	due, err := w.Store.ExpiredReviews(ctx, w.Store.DB, now, 100)
	if err != nil {
		return time.Time{}, err
	}
	for _, r := range due {
		pub, err := w.Store.GetPublication(ctx, w.Store.DB, r.PublicationID)
		if err != nil {
			return time.Time{}, err
		}
		_, err = w.finishReview(ctx, systemActor, pub, "expired", "")
		if err != nil && !domain.IsRefusal(err, domain.KindConflict) {
			return time.Time{}, err
		}
	}
	return w.Store.NextReviewExpiry(ctx, w.Store.DB)
}
