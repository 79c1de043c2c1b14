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
	"time"

	"github.com/paperclipai/paperclipai/internal/agentmail"
	"github.com/paperclipai/paperclipai/internal/attachment"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/email"
	"github.com/paperclipai/paperclipai/internal/store"
)

// errPaused tells execute that the inbox is paused: not a failure.
var errPaused = &sendFailure{msg: "paused"}

// sendFailure is a classified execution failure. It is one of: final (the
// send is refused and never made), transient (an attempt was made and may
// have reached the provider: retry with the same key, outcome uncertain),
// or recheck (no attempt was made because a check could not be made, say
// the database is unwell: look again later, outcome unchanged).
type sendFailure struct {
	transient bool
	recheck   bool
	msg       string
	retry     time.Duration
	// err is the cause of a recheck, for the log (never stored or shown).
	err error
}

// recheckDelay is how long a send whose checks could not be made waits
// before they are made again.
const recheckDelay = 5 * time.Second

const recheckMsg = "The send could not be checked just now; it will be checked again before anything is sent"

func final(msg string) *sendFailure { return &sendFailure{msg: msg} }

func recheck(err error) *sendFailure { return &sendFailure{recheck: true, msg: recheckMsg, err: err} }

// lookup classifies the error of a lookup the send depends on: a missing
// row refuses the send with msg, any other failure is a recheck.
func lookup(err error, msg string) *sendFailure {
	if errors.Is(err, store.ErrNotFound) {
		return final(msg)
	}
	return recheck(err)
}

// verdict classifies the error of an authority check: a refusal (a
// *domain.Refusal, its message shown as is) is final, anything else is a
// recheck. "Could not check" is never taken for "no".
func verdict(err error) *sendFailure {
	if r, ok := domain.AsRefusal(err); ok {
		return final(r.Message)
	}
	return recheck(err)
}

// execute runs one attempt of a send under its thread lease (docs/email-pipeline.md, "Execution").
func (w *Worker) execute(ctx context.Context, pubID string, l *store.Lease) error {
	pub, err := w.Store.GetPublication(ctx, w.Store.DB, pubID)
	if err != nil {
		return err
	}
	if pub.State != domain.SendPending && pub.State != domain.SendStreaming && pub.State != domain.SendRetry {
		return nil
	}
	if pub.Outcome != domain.OutcomeQueued && pub.Outcome != domain.OutcomeUncertain {
		return nil
	}
	now := w.Store.Now()
	if pub.NextAttemptAt != nil && pub.NextAttemptAt.After(now) {
		return nil
	}
	if pub.FirstAttemptAt != nil && now.Sub(*pub.FirstAttemptAt) >= ConfirmWindow {
		return w.Store.Tx(ctx, func(tx *sql.Tx) error {
			if err := w.Store.SetPublicationState(ctx, tx, pub.ID, domain.SendUnknown, expiredMsg, nil); err != nil {
				return err
			}
			_, err := w.setOutcome(ctx, tx, pub.ID, domain.OutcomeUncertain)
			return err
		})
	}
	var req SendRequest
	var actor email.Sender
	if err := json.Unmarshal(pub.Request, &req); err != nil {
		return fmt.Errorf("decode send request: %w", err)
	}
	if err := json.Unmarshal(pub.Actor, &actor); err != nil {
		return fmt.Errorf("decode send actor: %w", err)
	}
	ep, runtimeKey, in, fail := w.prepare(ctx, pub, req, actor)
	if fail == errPaused {
		return nil // the inbox was paused meanwhile: the send waits for resume
	}
	if fail != nil {
		return w.recordFailure(ctx, pub, fail, false)
	}
	if err := w.Store.StartAttempt(ctx, w.Store.DB, pub.ID); errors.Is(err, store.ErrSendSettled) {
		return nil // settled meanwhile (its inbox was disconnected): never sent
	} else if err != nil {
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
	client := w.Client.WithAPIKey(runtimeKey)
	var resp *agentmail.SendMessageResponse
	if req.IsReply() {
		resp, err = client.ReplyToMessage(ctx, ep.Address, req.ReplyToMessageID, in.reply, pub.ID)
	} else {
		resp, err = client.SendMessage(ctx, ep.Address, in.send, pub.ID)
	}
	if err != nil {
		return w.recordFailure(ctx, pub, classify(err), true)
	}
	return w.recordSent(ctx, pub, ep, resp.MessageID, resp.ThreadID)
}

// prepared holds the provider request built for an attempt.
type prepared struct {
	send  agentmail.SendMessageRequest
	reply agentmail.ReplyRequest
}

// prepare re-authorizes everything with the stored actor and builds the
// provider request. A refusal here is final (the send is never made); a
// check that could not be made is a recheck, so a database hiccup never
// fails a send nor lets one pass a loop guard it could not read.
func (w *Worker) prepare(ctx context.Context, pub store.EmailPublication, req SendRequest, actor email.Sender) (domain.EmailEndpoint, string, prepared, *sendFailure) {
	var in prepared
	ep, key, err := w.Email.ActiveEndpoint(ctx, w.Store.DB, pub.EndpointID)
	switch {
	case err == nil:
	case ep.Status == domain.EndpointPaused:
		return ep, "", in, errPaused
	case errors.Is(err, store.ErrNotFound):
		return ep, "", in, final("This email inbox is not available")
	default:
		return ep, "", in, verdict(err)
	}
	const taskRefused = "Email task is no longer authorized for this send"
	task, err := w.Store.GetIssue(ctx, w.Store.DB, pub.IssueID)
	if err != nil {
		return ep, "", in, lookup(err, taskRefused)
	}
	if task.Status == domain.IssueCancelled || (actor.AgentID != "" && task.AssigneeAgentID != actor.AgentID) {
		return ep, "", in, final(taskRefused)
	}
	source := task
	if !req.IsReply() {
		if source, err = w.Store.GetIssue(ctx, w.Store.DB, req.ParentIssueID); err != nil {
			return ep, "", in, lookup(err, taskRefused)
		}
	}
	if err := w.Email.AuthorizeSend(ctx, w.Store.DB, actor, ep, source, false); err != nil {
		return ep, "", in, verdict(err)
	}
	d, err := w.Policy.Check(ctx, w.Store.DB, ep.CompanyID, w.authzActor(ctx, w.Store.DB, actor), sendAction(req))
	if err != nil {
		return ep, "", in, recheck(err)
	}
	if !d.Allowed {
		return ep, "", in, final("Action policy no longer allows this email")
	}
	atts, fail := w.loadAttachments(ctx, pub, source.ID)
	if fail != nil {
		return ep, "", in, fail
	}
	headers := map[string]string{PublicationHeader: pub.ID}
	auto, err := w.Store.EndpointAutoSubmitted(ctx, w.Store.DB, ep.ID)
	if err != nil {
		// Never send without loop-guard headers we could not look up.
		return ep, "", in, recheck(err)
	}
	if auto {
		// Loop guards (RFC 3834): agent mail is machine-generated, and
		// Exchange-style auto-responders should stay quiet.
		headers["Auto-Submitted"] = "auto-replied"
		if !req.IsReply() {
			headers["Auto-Submitted"] = "auto-generated"
		}
		headers["X-Auto-Response-Suppress"] = "All"
	}
	// A reviewer's approved version replaces what it edited; the agent's
	// request itself stays as it was accepted.
	v, err := approvedVersion(pub)
	if err != nil {
		return ep, "", in, final("The approved version of this email could not be read")
	}
	to, cc, recipients, err := w.effectiveRecipients(ctx, w.Store.DB, ep, pub, req, v)
	if err != nil {
		return ep, "", in, verdict(err)
	}
	if v != nil && v.Text != nil {
		req.Text = *v.Text
	}
	if v != nil && v.Subject != nil {
		req.Subject = v.Subject
	}
	if req.IsReply() {
		in.reply = agentmail.ReplyRequest{To: to, Cc: cc, Text: req.Text, Attachments: atts, Headers: headers}
	} else {
		in.send = agentmail.SendMessageRequest{To: to, Cc: cc, Bcc: req.Bcc, Subject: *req.Subject, Text: req.Text,
			Attachments: atts, Headers: headers}
	}
	sup, err := w.Store.SuppressionsAmong(ctx, w.Store.DB, ep.ID, lowerAll(recipients))
	if err != nil {
		// Never send past a suppression list we could not read.
		return ep, "", in, recheck(err)
	}
	if len(sup) > 0 {
		return ep, "", in, final(suppressedError(sup))
	}
	return ep, key, in, nil
}

// loadAttachments reads each selected attachment and checks its bytes still
// match what was recorded at acceptance.
func (w *Worker) loadAttachments(ctx context.Context, pub store.EmailPublication, sourceIssueID string) ([]agentmail.SendAttachment, *sendFailure) {
	var refs []AttachmentRef
	if len(pub.Attachments) > 0 {
		if err := json.Unmarshal(pub.Attachments, &refs); err != nil {
			return nil, final("Email attachments could not be read")
		}
	}
	const foreign, changed = "Email attachments must belong to the source task", "Email attachment changed after selection"
	var out []agentmail.SendAttachment
	for _, ref := range refs {
		att, err := w.Store.GetAttachment(ctx, w.Store.DB, ref.ID)
		if err != nil {
			return nil, lookup(err, foreign)
		}
		if att.CompanyID != pub.CompanyID || att.IssueID != sourceIssueID {
			return nil, final(foreign)
		}
		content, err := w.Attachments.Open(ctx, att.SHA256)
		if errors.Is(err, attachment.ErrContentMissing) {
			return nil, final("Email attachment content is missing")
		}
		if errors.Is(err, attachment.ErrCorrupt) {
			return nil, final(changed)
		}
		if err != nil {
			return nil, recheck(err)
		}
		if content.Size() != ref.SizeBytes || ref.SizeBytes > w.Attachments.MaxBytes {
			return nil, final(changed)
		}
		// The whole file is in memory once here (and once more as base64):
		// the provider's send API takes attachments inline in its JSON body.
		data := make([]byte, content.Size())
		if _, err := io.ReadFull(content, data); errors.Is(err, attachment.ErrCorrupt) {
			return nil, final(changed)
		} else if err != nil {
			return nil, recheck(err)
		}
		if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != ref.SHA256 {
			return nil, final(changed)
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

// recordFailure writes a classified failure: a recheck waits recheckDelay
// with its outcome unchanged; transient → retry + uncertain (only when an
// attempt was made); otherwise failed.
func (w *Worker) recordFailure(ctx context.Context, pub store.EmailPublication, f *sendFailure, attempted bool) error {
	if f.recheck {
		w.Log.Warn("send checks could not be made; checking again later", "publication", pub.ID, "err", f.err)
		next := w.Store.Now().Add(recheckDelay)
		return w.Store.Tx(ctx, func(tx *sql.Tx) error {
			if err := w.Store.SetPublicationState(ctx, tx, pub.ID, domain.SendRetry, f.msg, &next); err != nil {
				return err
			}
			return w.notifyTx(ctx, tx)
		})
	}
	defer w.notifyEvents()
	return w.Store.Tx(ctx, func(tx *sql.Tx) error {
		if f.transient && attempted {
			cur, err := w.Store.GetPublication(ctx, tx, pub.ID)
			if err != nil {
				return err
			}
			next := w.Store.Now().Add(backoff(cur.Attempts, f.retry))
			if err := w.Store.SetPublicationState(ctx, tx, pub.ID, domain.SendRetry, f.msg, &next); err != nil {
				return err
			}
			if _, err = w.setOutcome(ctx, tx, pub.ID, domain.OutcomeUncertain, domain.OutcomeQueued, domain.OutcomeUncertain); err != nil {
				return err
			}
			return w.notifyTx(ctx, tx)
		}
		if err := w.Store.SetPublicationState(ctx, tx, pub.ID, domain.SendFailed, f.msg, nil); err != nil {
			return err
		}
		if _, err := w.setOutcome(ctx, tx, pub.ID, domain.OutcomeFailed, domain.OutcomeQueued, domain.OutcomeUncertain); err != nil {
			return err
		}
		if err := w.emit(ctx, tx, pub.CompanyID, "email.send_failed", map[string]any{"publicationId": pub.ID, "sendId": pub.ID, "endpointId": pub.EndpointID,
			"issueId": pub.IssueID, "error": f.msg}); err != nil {
			return err
		}
		return w.Store.Audit(ctx, tx, systemActor.AuditActor(), pub.CompanyID, "email.failed", "email_publication", pub.ID, map[string]any{"error": f.msg})
	})
}

// recordSent stores a successful send: the conversation is bound to the
// provider thread, the publication published and the outcome sent.
func (w *Worker) recordSent(ctx context.Context, pub store.EmailPublication, ep domain.EmailEndpoint, messageID, threadID string) error {
	err := w.Store.Tx(ctx, func(tx *sql.Tx) error {
		if err := w.Store.DB.AdvisoryXactLock(ctx, tx, "email:"+ep.ID+":"+threadID); err != nil {
			return err
		}
		cur, err := w.Store.GetPublication(ctx, tx, pub.ID)
		if err != nil {
			return err
		}
		if cur.ProviderMessageID != "" && cur.ProviderMessageID != messageID {
			return fmt.Errorf("send %s: AgentMail returned a different message for this send", pub.ID)
		}
		if err := w.bindThread(ctx, tx, ep, cur.ConversationID, threadID); err != nil {
			return err
		}
		if err := w.Store.MarkPublished(ctx, tx, pub.ID, messageID, threadID); err != nil {
			return err
		}
		if _, err := w.setOutcome(ctx, tx, pub.ID, domain.OutcomeSent, domain.OutcomeQueued, domain.OutcomeUncertain); err != nil {
			return err
		}
		// Admit before touching the inbox row. Why: the socket may admit
		// this message's receipts at the same moment, and admission inserts
		// its rows before it updates the inbox row; inserting after taking
		// that row's lock here could deadlock against it (each waiting on
		// the other's insert or row).
		w.admitSent(ctx, tx, ep, messageID, threadID)
		// Everyone this inbox has sent to may be mailed again at once
		// under review "new_recipients".
		if err := w.rememberSent(ctx, tx, ep, cur); err != nil {
			return err
		}
		if err := w.Store.TouchEndpointPublication(ctx, tx, ep.ID); err != nil {
			return err
		}
		return w.Store.Audit(ctx, tx, systemActor.AuditActor(), pub.CompanyID, "email.sent", "email_publication", pub.ID, map[string]any{"endpointId": ep.ID})
	})
	if err != nil {
		return err
	}
	w.InboundWork.Notify()
	w.Metrics.AcceptedToSent.Observe(max(w.Store.Now().Sub(pub.CreatedAt), 0).Seconds())
	if w.Observe != nil {
		w.Observe(w.Store.Now().Sub(pub.CreatedAt))
	}
	return nil
}

// rememberSent records a sent send's recipients as known to its inbox.
func (w *Worker) rememberSent(ctx context.Context, tx *sql.Tx, ep domain.EmailEndpoint, pub store.EmailPublication) error {
	var req SendRequest
	if err := json.Unmarshal(pub.Request, &req); err != nil {
		return fmt.Errorf("decode send request: %w", err)
	}
	v, err := approvedVersion(pub)
	if err != nil {
		return err
	}
	_, _, all, err := w.effectiveRecipients(ctx, tx, ep, pub, req, v)
	if err != nil {
		// A reply whose answered message cannot be read now still sent:
		// remembering is a convenience, never a reason to fail the record.
		w.Log.Warn("remember sent recipients", "publication", pub.ID, "err", err)
		return nil
	}
	return w.Store.RememberRecipients(ctx, tx, ep.ID, lowerAll(all), "sent")
}
