package outbound

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/paperclipai/paperclipai/internal/agentmail"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/httpx"
	"github.com/paperclipai/paperclipai/internal/store"
)

// headsPerEndpoint bounds the sends examined per endpoint per tick.
const headsPerEndpoint = 25

// Run executes sends until ctx ends. It sleeps until the earliest retry
// deadline or until Notify; with nothing pending it issues no queries.
// Sends run in their own goroutines (at most Concurrency at once), so one
// slow provider call never holds up other conversations; a finished send
// wakes the loop for its conversation's next send.
func (s *Service) Run(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	sem := make(chan struct{}, max(1, s.Concurrency))
	var wg sync.WaitGroup
	defer wg.Wait()
	var mu sync.Mutex
	inflight := map[string]bool{} // conversation ids with a send executing here
	for {
		mu.Lock()
		busy := make(map[string]bool, len(inflight))
		for k := range inflight {
			busy[k] = true
		}
		mu.Unlock()
		due, next, err := s.tick(ctx, busy)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			s.Log.Error("send worker tick", "err", err)
			next = s.Store.Now().Add(time.Second)
		}
		for _, p := range due {
			select {
			case sem <- struct{}{}:
			default:
				continue // at capacity: a finishing send wakes the loop
			}
			mu.Lock()
			inflight[p.ConversationID] = true
			mu.Unlock()
			wg.Add(1)
			go func(p store.EmailPublication) {
				defer wg.Done()
				retryAt, err := s.process(ctx, p.ID)
				if err != nil && ctx.Err() == nil {
					s.Log.Error("send email", "publication", p.ID, "err", err)
				}
				mu.Lock()
				delete(inflight, p.ConversationID)
				mu.Unlock()
				<-sem
				if !retryAt.IsZero() {
					s.wakeAt(ctx, retryAt)
					return
				}
				s.Notify()
			}(p)
		}
		wait := time.Duration(math.MaxInt64)
		if !next.IsZero() {
			wait = max(time.Until(next), 10*time.Millisecond)
		}
		timer.Reset(min(wait, 24*time.Hour))
		select {
		case <-ctx.Done():
			return
		case <-s.signal:
		case <-timer.C:
		}
	}
}

// wakeAt notifies the loop at t (when a lease held elsewhere expires).
func (s *Service) wakeAt(ctx context.Context, t time.Time) {
	go func() {
		select {
		case <-ctx.Done():
		case <-time.After(time.Until(t)):
			s.Notify()
		}
	}()
}

// tick returns the due head-of-conversation sends (skipping conversations
// with a send already executing here) and the next retry deadline (zero
// when nothing is waiting).
func (s *Service) tick(ctx context.Context, busy map[string]bool) ([]store.EmailPublication, time.Time, error) {
	eps, err := s.Store.EndpointsWithPendingSends(ctx, s.Store.DB)
	if err != nil {
		return nil, time.Time{}, err
	}
	var next time.Time
	var due []store.EmailPublication
	now := s.Store.Now()
	for _, epID := range eps {
		ep, err := s.Store.GetEndpoint(ctx, s.Store.DB, epID)
		if err != nil || ep.Status != domain.EndpointActive {
			continue // paused or removed inboxes keep their queue until resumed
		}
		sends, err := s.Store.PendingSends(ctx, s.Store.DB, epID, headsPerEndpoint)
		if err != nil {
			return nil, time.Time{}, err
		}
		// Head-of-line per conversation: a later reply never overtakes an
		// earlier send of the same conversation, even while it waits.
		seen := map[string]bool{}
		for _, p := range sends {
			if seen[p.ConversationID] {
				continue
			}
			seen[p.ConversationID] = true
			if busy[p.ConversationID] {
				continue
			}
			if p.NextAttemptAt != nil && p.NextAttemptAt.After(now) {
				if next.IsZero() || p.NextAttemptAt.Before(next) {
					next = *p.NextAttemptAt
				}
				continue
			}
			due = append(due, p)
		}
	}
	return due, next, nil
}

// errPaused tells execute that the inbox is paused: not a failure.
var errPaused = &sendFailure{msg: "paused"}

// sendFailure is a classified execution failure.
type sendFailure struct {
	transient bool
	msg       string
	retry     time.Duration
}

// process runs one send under its conversation's thread lease. When
// another worker holds the lease it returns when to look again, so the loop
// waits instead of spinning.
func (s *Service) process(ctx context.Context, pubID string) (time.Time, error) {
	pub, err := s.Store.GetPublication(ctx, s.Store.DB, pubID)
	if err != nil {
		return time.Time{}, err
	}
	conv, err := s.Store.GetConversation(ctx, s.Store.DB, pub.ConversationID)
	if err != nil {
		return time.Time{}, err
	}
	l, until, err := s.Store.TryLease(ctx, s.Store.DB, pub.CompanyID, pub.EndpointID, store.ThreadLeaseKey(conv.ExternalThreadID), s.Holder, s.LeaseTTL)
	if err != nil {
		return time.Time{}, err
	}
	if l == nil {
		// Another worker holds the thread: usually the inbound worker for a
		// moment, or a dead replica until the lease expires. Look again
		// shortly, but never later than the expiry.
		soon := s.Store.Now().Add(200 * time.Millisecond)
		if until.IsZero() || until.After(soon) {
			return soon, nil
		}
		return until.Add(10 * time.Millisecond), nil
	}
	defer func() { _ = l.Release(ctx) }()
	return time.Time{}, s.execute(ctx, pubID, l)
}

// execute runs one attempt of a send under its thread lease (reference §6.4).
func (s *Service) execute(ctx context.Context, pubID string, l *store.Lease) error {
	pub, err := s.Store.GetPublication(ctx, s.Store.DB, pubID)
	if err != nil {
		return err
	}
	if pub.State != "pending" && pub.State != "streaming" && pub.State != "retry" {
		return nil
	}
	if pub.Outcome != OutcomeQueued && pub.Outcome != OutcomeUncertain {
		return nil
	}
	now := s.Store.Now()
	if pub.NextAttemptAt != nil && pub.NextAttemptAt.After(now) {
		return nil
	}
	if pub.FirstAttemptAt != nil && now.Sub(*pub.FirstAttemptAt) >= ConfirmWindow {
		return s.Store.Tx(ctx, func(tx *sql.Tx) error {
			if err := s.Store.SetPublicationState(ctx, tx, pub.ID, "delivery_unknown", expiredMsg, nil); err != nil {
				return err
			}
			_, err := s.Store.SetSendOutcome(ctx, tx, pub.ID, OutcomeUncertain)
			return err
		})
	}
	var req SendRequest
	var actor Actor
	if err := json.Unmarshal(pub.Request, &req); err != nil {
		return fmt.Errorf("decode send request: %w", err)
	}
	if err := json.Unmarshal(pub.Actor, &actor); err != nil {
		return fmt.Errorf("decode send actor: %w", err)
	}
	ep, runtimeKey, in, fail := s.prepare(ctx, pub, req, actor)
	if fail == errPaused {
		return nil // the inbox was paused meanwhile: the send waits for resume
	}
	if fail != nil {
		return s.recordFailure(ctx, pub, fail, false)
	}
	if err := s.Store.StartAttempt(ctx, s.Store.DB, pub.ID); err != nil {
		return err
	}
	// Fence: the lease must still be ours right before the provider call
	// (checking it also extends it by its TTL).
	held, err := l.Renew(ctx)
	if err != nil {
		return err
	}
	if !held {
		return fmt.Errorf("send %s: thread lease lost before the provider call", pub.ID)
	}
	client := s.Client.WithAPIKey(runtimeKey)
	var resp *agentmail.SendMessageResponse
	if req.IsReply() {
		resp, err = client.ReplyToMessage(ctx, ep.Address, req.ReplyToMessageID, in.reply, pub.ID)
	} else {
		resp, err = client.SendMessage(ctx, ep.Address, in.send, pub.ID)
	}
	if err != nil {
		return s.recordFailure(ctx, pub, classify(err), true)
	}
	return s.recordSent(ctx, pub, ep, resp.MessageID, resp.ThreadID)
}

// prepared holds the provider request built for an attempt.
type prepared struct {
	send  agentmail.SendMessageRequest
	reply agentmail.ReplyRequest
}

// prepare re-authorizes everything with the stored actor and builds the
// provider request; any failure here is final (never sent).
func (s *Service) prepare(ctx context.Context, pub store.EmailPublication, req SendRequest, actor Actor) (domain.EmailEndpoint, string, prepared, *sendFailure) {
	var in prepared
	final := func(msg string) *sendFailure { return &sendFailure{msg: msg} }
	ep, key, err := s.Email.ActiveEndpoint(ctx, s.Store.DB, pub.EndpointID)
	if err != nil {
		if ep.Status == domain.EndpointPaused {
			return ep, "", in, errPaused
		}
		return ep, "", in, final(httpx.PublicMessage(err, "This email inbox is not available"))
	}
	task, err := s.Store.GetIssue(ctx, s.Store.DB, pub.IssueID)
	if err != nil || task.Status == domain.IssueCancelled || (actor.AgentID != "" && task.AssigneeAgentID != actor.AgentID) {
		return ep, "", in, final("Email task is no longer authorized for this send")
	}
	source := task
	if !req.IsReply() {
		if source, err = s.Store.GetIssue(ctx, s.Store.DB, req.ParentIssueID); err != nil {
			return ep, "", in, final("Email task is no longer authorized for this send")
		}
	}
	if err := s.authorize(ctx, s.Store.DB, actor, ep, source, false); err != nil {
		return ep, "", in, final(httpx.PublicMessage(err, "Email send is no longer authorized"))
	}
	action := "email.send"
	if req.IsReply() {
		action = "email.reply"
	}
	if d, err := s.Policy.Check(ctx, s.Store.DB, ep.CompanyID, s.authzActor(ctx, s.Store.DB, actor), action); err != nil || !d.Allowed {
		return ep, "", in, final("Action policy no longer allows this email")
	}
	atts, fail := s.loadAttachments(ctx, pub, source.ID)
	if fail != nil {
		return ep, "", in, fail
	}
	headers := map[string]string{PublicationHeader: pub.ID}
	if auto, err := s.Store.EndpointAutoSubmitted(ctx, s.Store.DB, ep.ID); err == nil && auto {
		// Loop guards (RFC 3834): agent mail is machine-generated, and
		// Exchange-style auto-responders should stay quiet.
		headers["Auto-Submitted"] = "auto-replied"
		if !req.IsReply() {
			headers["Auto-Submitted"] = "auto-generated"
		}
		headers["X-Auto-Response-Suppress"] = "All"
	}
	var recipients []string
	if req.IsReply() {
		target, err := s.Store.EmailMessageByProviderID(ctx, s.Store.DB, ep.ID, req.ReplyToMessageID)
		if err != nil || target.ConversationID != pub.ConversationID {
			return ep, "", in, final("Reply target is not in this inbox conversation")
		}
		to, cc := ReplyRecipients(target.Envelope.From, target.Envelope.To, target.Envelope.Cc, target.Envelope.ReplyTo, ep.Address, *req.ReplyAll)
		if len(to) == 0 {
			return ep, "", in, final("The reply has no external recipient")
		}
		recipients = append(to, cc...)
		in.reply = agentmail.ReplyRequest{To: to, Cc: cc, Text: req.Text, Attachments: atts, Headers: headers}
	} else {
		recipients = append(append(append([]string{}, req.To...), req.Cc...), req.Bcc...)
		in.send = agentmail.SendMessageRequest{To: req.To, Cc: req.Cc, Bcc: req.Bcc, Subject: *req.Subject, Text: req.Text,
			Attachments: atts, Headers: headers}
	}
	if sup, err := s.Store.SuppressedAmong(ctx, s.Store.DB, ep.ID, lowerAll(recipients)); err == nil && len(sup) > 0 {
		return ep, "", in, final("A recipient previously bounced permanently or complained; this email was not sent")
	}
	return ep, key, in, nil
}

// loadAttachments reads each selected attachment and checks its bytes still
// match what was recorded at acceptance.
func (s *Service) loadAttachments(ctx context.Context, pub store.EmailPublication, sourceIssueID string) ([]agentmail.SendAttachment, *sendFailure) {
	var refs []AttachmentRef
	if len(pub.Attachments) > 0 {
		if err := json.Unmarshal(pub.Attachments, &refs); err != nil {
			return nil, &sendFailure{msg: "Email attachments could not be read"}
		}
	}
	var out []agentmail.SendAttachment
	for _, ref := range refs {
		att, err := s.Store.GetAttachment(ctx, s.Store.DB, ref.ID)
		if err != nil || att.CompanyID != pub.CompanyID || att.IssueID != sourceIssueID {
			return nil, &sendFailure{msg: "Email attachments must belong to the source task"}
		}
		f, err := s.Attachments.Open(att.SHA256)
		if err != nil {
			return nil, &sendFailure{msg: "Email attachment changed after selection"}
		}
		data, err := io.ReadAll(io.LimitReader(f, s.Attachments.MaxBytes+1))
		f.Close()
		sum := sha256.Sum256(data)
		if err != nil || int64(len(data)) != ref.SizeBytes || hex.EncodeToString(sum[:]) != ref.SHA256 {
			return nil, &sendFailure{msg: "Email attachment changed after selection"}
		}
		out = append(out, agentmail.SendAttachment{Filename: ref.Filename, ContentType: ref.ContentType,
			Content: base64.StdEncoding.EncodeToString(data)})
	}
	return out, nil
}

// classify decides whether a provider failure may have sent the email
// (retry with the same key; outcome uncertain) or certainly did not (failed).
func classify(err error) *sendFailure {
	var pe *agentmail.Error
	if errors.As(err, &pe) {
		// Our request body is immutable per key, so a 409 on a keyed send
		// can only mean the first attempt is still in flight at the
		// provider: wait and retry with the same key, never give up.
		if pe.Status >= 500 || pe.Status == 429 || pe.Status == 409 {
			return &sendFailure{transient: true, retry: pe.RetryAfter, msg: fmt.Sprintf("AgentMail request failed (%d); retrying with the same idempotency key", pe.Status)}
		}
		return &sendFailure{msg: fmt.Sprintf("AgentMail refused the email (%d, %s)", pe.Status, pe.Code)}
	}
	if agentmail.MayHaveBeenSent(err) || agentmail.IsNetworkError(err) {
		return &sendFailure{transient: true, msg: "The AgentMail request did not complete; retrying with the same idempotency key"}
	}
	var re *agentmail.ResponseError
	if errors.As(err, &re) {
		return &sendFailure{transient: true, msg: "AgentMail returned an unreadable response; retrying with the same idempotency key"}
	}
	return &sendFailure{msg: "The email could not be sent"}
}

// backoff is max(Retry-After clamped to 1–300 s, min(300 s, 2^min(attempts,8) s)).
func backoff(attempts int, retryAfter time.Duration) time.Duration {
	exp := min(300*time.Second, time.Second<<min(attempts, 8))
	ra := min(max(retryAfter, time.Second), 300*time.Second)
	return max(ra, exp)
}

// recordFailure writes a classified failure: transient → retry + uncertain
// (only when an attempt was made), otherwise failed.
func (s *Service) recordFailure(ctx context.Context, pub store.EmailPublication, f *sendFailure, attempted bool) error {
	return s.Store.Tx(ctx, func(tx *sql.Tx) error {
		if f.transient && attempted {
			cur, err := s.Store.GetPublication(ctx, tx, pub.ID)
			if err != nil {
				return err
			}
			next := s.Store.Now().Add(backoff(cur.Attempts, f.retry))
			if err := s.Store.SetPublicationState(ctx, tx, pub.ID, "retry", f.msg, &next); err != nil {
				return err
			}
			_, err = s.Store.SetSendOutcome(ctx, tx, pub.ID, OutcomeUncertain, OutcomeQueued, OutcomeUncertain)
			return err
		}
		if err := s.Store.SetPublicationState(ctx, tx, pub.ID, "failed", f.msg, nil); err != nil {
			return err
		}
		if _, err := s.Store.SetSendOutcome(ctx, tx, pub.ID, OutcomeFailed, OutcomeQueued, OutcomeUncertain); err != nil {
			return err
		}
		return s.audit(ctx, tx, systemActor(), pub.CompanyID, "email.failed", pub.ID, map[string]any{"error": f.msg})
	})
}

// recordSent stores a successful send: the conversation is bound to the
// provider thread, the publication published and the outcome sent.
func (s *Service) recordSent(ctx context.Context, pub store.EmailPublication, ep domain.EmailEndpoint, messageID, threadID string) error {
	err := s.Store.Tx(ctx, func(tx *sql.Tx) error {
		if err := s.Store.DB.AdvisoryXactLock(ctx, tx, "email:"+ep.ID+":"+threadID); err != nil {
			return err
		}
		cur, err := s.Store.GetPublication(ctx, tx, pub.ID)
		if err != nil {
			return err
		}
		if cur.ProviderMessageID != "" && cur.ProviderMessageID != messageID {
			return fmt.Errorf("send %s: AgentMail returned a different message for this send", pub.ID)
		}
		if err := s.bindThread(ctx, tx, ep, cur.ConversationID, threadID); err != nil {
			return err
		}
		if err := s.Store.MarkPublished(ctx, tx, pub.ID, messageID, threadID); err != nil {
			return err
		}
		if _, err := s.Store.SetSendOutcome(ctx, tx, pub.ID, OutcomeSent, OutcomeQueued, OutcomeUncertain); err != nil {
			return err
		}
		if err := s.Store.TouchEndpointPublication(ctx, tx, ep.ID); err != nil {
			return err
		}
		return s.audit(ctx, tx, systemActor(), pub.CompanyID, "email.sent", pub.ID, map[string]any{"endpointId": ep.ID})
	})
	if err != nil {
		return err
	}
	if s.Observe != nil {
		s.Observe(s.Store.Now().Sub(pub.CreatedAt))
	}
	if s.Admit != nil {
		ev := agentmail.Event{Kind: agentmail.EventMessageSent, InboxID: ep.Address, MessageID: messageID, ThreadID: threadID,
			EventID: "paperclip-sent:" + messageID}
		if err := s.Admit(ctx, ep.ID, ev); err != nil {
			s.Log.Warn("admit sent message for thread context", "publication", pub.ID, "err", err)
		}
	}
	return nil
}

// bindThread sets a conversation's provider thread (replacing a pending
// placeholder); a conversation already bound to the same thread is kept.
func (s *Service) bindThread(ctx context.Context, tx *sql.Tx, ep domain.EmailEndpoint, conversationID, threadID string) error {
	conv, err := s.Store.GetConversation(ctx, tx, conversationID)
	if err != nil {
		return err
	}
	if conv.ExternalThreadID == threadID || !strings.HasPrefix(conv.ExternalThreadID, "pending:") {
		return s.Store.TouchConversation(ctx, tx, conv.ID, "waiting")
	}
	return s.Store.SetConversationThread(ctx, tx, conv.ID, threadID, "waiting")
}
