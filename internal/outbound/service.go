package outbound

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"log/slog"
	"time"

	"github.com/paperclipai/paperclipai/internal/agentmail"
	"github.com/paperclipai/paperclipai/internal/attachment"
	"github.com/paperclipai/paperclipai/internal/authz"
	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/email"
	"github.com/paperclipai/paperclipai/internal/notify"
	"github.com/paperclipai/paperclipai/internal/policy"
	"github.com/paperclipai/paperclipai/internal/store"
)

// PublicationHeader carries the publication id on every provider attempt,
// so a sent message can be matched to its intent.
const PublicationHeader = "X-Paperclip-Publication-Id"

// Default loop-guard caps, applied as action-policy rate limits; a company
// policy for the action with a rate limit overrides them.
const (
	ActionThreadCap    = "email.thread_sends"
	ActionRecipientCap = "email.recipient_sends"
	DefaultThreadCap   = 20
	DefaultRecipCap    = 30
	DefaultCapWindow   = time.Hour
)

// ConfirmWindow bounds automatic attempts: none starts 23 hours after the
// first, conservatively inside the provider's 24-hour deduplication window.
const ConfirmWindow = 23 * time.Hour

const expiredMsg = "The send confirmation window has expired. Check AgentMail before resolving this delivery."

// Options configure the send side. The same options serve the Service
// (the API: Accept, Thread, Delivery, Resolve, receipts) and its Worker.
type Options struct {
	Store  *store.Store
	Email  *email.Service
	Authz  *authz.Service
	Policy *policy.Service
	// Client is the provider client without a key.
	Client *agentmail.Client
	// Attachments is the content-addressed store the selected attachments
	// are read from.
	Attachments attachment.Store
	Log         *slog.Logger
	// Holder names this process in lease rows.
	Holder string
	// Work wakes the send worker; a committed send or resume signals it.
	Work notify.Signal
	// InboundWork wakes the inbound worker after a sent message was
	// admitted as thread context.
	InboundWork notify.Signal
	// LeaseTTL is the per-thread lease time. The worker renews it right
	// before the provider call; one attempt is bounded by the provider
	// timeout (25 s), far below the default 90 s.
	LeaseTTL time.Duration
	// Concurrency bounds sends executing at once in this process.
	Concurrency int
	// Metrics receives the send stage measurements; nil creates
	// unregistered ones.
	Metrics *Metrics
	// Wake wakes an agent whose held send was rejected or expired (nil:
	// only the task comment is written).
	Wake Waker
	// Events records company notification events (email.review_requested,
	// email.review_expired, email.send_failed); nil records none.
	Events Events
}

// Service accepts explicit email actions and answers for them (thread and
// delivery reads, resolution, receipts); its Worker executes them.
type Service struct {
	Options
}

// New returns a Service.
func New(o Options) *Service {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Work == nil {
		o.Work = notify.New()
	}
	if o.LeaseTTL <= 0 {
		o.LeaseTTL = 90 * time.Second
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 4
	}
	if o.Metrics == nil {
		o.Metrics = NewMetrics(nil)
	}
	return &Service{Options: o}
}

// Notify wakes the worker (call after committing new send work).
func (s *Service) Notify() { s.Work.Notify() }

// notifyChannel is the PostgreSQL channel on which commits that create
// send work (an accepted send, a scheduled retry) wake the send workers of
// every replica. Why: the replica that accepted or scheduled a send may
// die before it acts, and an idle replica would otherwise not look until
// its own next deadline, which may be never.
const notifyChannel = "paperclip_email_sends"

// notifyTx queues the cross-replica send signal, delivered only if tx
// commits (db.NotifyTx); on SQLite, with one process, the in-process
// signal after commit suffices.
func (s *Service) notifyTx(ctx context.Context, tx *sql.Tx) error {
	return s.Store.DB.NotifyTx(ctx, tx, notifyChannel)
}

// authzActor rebuilds an authz actor for audit and policy decisions.
func (s *Service) authzActor(ctx context.Context, q db.Querier, a email.Sender) authz.Actor {
	if a.AgentID != "" {
		ag, err := s.Store.GetAgent(ctx, q, a.AgentID)
		if err != nil {
			ag = domain.Agent{ID: a.AgentID}
		}
		return authz.Actor{Kind: authz.KindAgent, Agent: &ag, Run: &domain.Run{ID: a.RunID}, RunHeaderMatches: true}
	}
	return authz.Actor{Kind: authz.KindBoard, UserID: a.UserID, LocalBoard: a.LocalImplicit}
}

// SendSummary is the API shape of a send.
type SendSummary struct {
	ID                string             `json:"id"`
	IssueID           string             `json:"issueId"`
	ConversationID    string             `json:"conversationId"`
	EndpointID        string             `json:"endpointId"`
	Outcome           domain.SendOutcome `json:"outcome"`
	Error             *string            `json:"error"`
	ProviderMessageID *string            `json:"providerMessageId"`
	Request           json.RawMessage    `json:"request"`
	CreatedAt         time.Time          `json:"createdAt"`
	// SentAt is when the provider accepted the send; DeliveredAt when its
	// delivery receipt arrived.
	SentAt      *time.Time `json:"sentAt"`
	DeliveredAt *time.Time `json:"deliveredAt"`
	// Attempts counts provider calls made so far; FirstAttemptAt is when
	// the first began (the confirmation window counts from it) and
	// NextAttemptAt when the worker looks at the send again.
	Attempts       int        `json:"attempts"`
	FirstAttemptAt *time.Time `json:"firstAttemptAt"`
	NextAttemptAt  *time.Time `json:"nextAttemptAt"`
	// Retrying is true while the worker still owns the send (it will make
	// or repeat an attempt with the same idempotency key);
	// ConfirmationExpired is true once automatic retries stopped because
	// the confirmation window passed (only an operator can settle it; a
	// send parked by a disconnect says so in Error instead).
	Retrying            bool `json:"retrying"`
	ConfirmationExpired bool `json:"confirmationExpired"`
	// RequestedBy names who asked for the send: the agent and its run, or
	// a board user.
	RequestedBy SendRequester `json:"requestedBy"`
	// Label is the outcome in plain words; Receipt names the provider
	// receipt a failed send ended on (bounced, complained, rejected: it
	// was sent), null otherwise.
	Label   string  `json:"label"`
	Receipt *string `json:"receipt"`
	// Review is the held send's review (why held, until when, who decided
	// and what was changed); null for a send never held.
	Review *ReviewView `json:"review,omitempty"`
	// ErrorCode is recipient_suppressed for a send refused because a
	// recipient is suppressed; ErrorDetails then holds the path of the
	// company's suppression list ("suppressions").
	ErrorCode    *string        `json:"errorCode,omitempty"`
	ErrorDetails map[string]any `json:"errorDetails,omitempty"`
	// Message explains the outcome to the agent in one line (set while a
	// send awaits review).
	Message *string `json:"message,omitempty"`
	// Attachments are the files selected at acceptance (names, types and
	// sizes), as a reviewer sees them.
	Attachments []AttachmentRef `json:"attachments"`
}

// SendRequester is who requested a send.
type SendRequester struct {
	AgentID *string `json:"agentId"`
	RunID   *string `json:"runId"`
	UserID  *string `json:"userId"`
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// summarizeSend presents a send.
func summarizeSend(p store.EmailPublication) SendSummary {
	out := SendSummary{ID: p.ID, IssueID: p.IssueID, ConversationID: p.ConversationID, EndpointID: p.EndpointID,
		Outcome: p.Outcome, Request: p.Request, CreatedAt: p.CreatedAt, SentAt: p.PublishedAt, DeliveredAt: p.DeliveredAt,
		Attempts: p.Attempts, FirstAttemptAt: p.FirstAttemptAt, NextAttemptAt: p.NextAttemptAt,
		Retrying: p.Outcome != domain.OutcomeAwaitingReview && (p.State == domain.SendPending || p.State == domain.SendStreaming || p.State == domain.SendRetry),
		// A send parked because its inbox was disconnected is also
		// delivery_unknown, with its own error: only the window's error
		// means the window expired.
		ConfirmationExpired: p.State == domain.SendUnknown && p.Error == expiredMsg}
	out.Label, out.Receipt = describeSend(p)
	out.Attachments = []AttachmentRef{}
	if len(p.Attachments) > 0 {
		_ = json.Unmarshal(p.Attachments, &out.Attachments)
	}
	if p.Outcome == domain.OutcomeAwaitingReview {
		m := HeldMessage
		out.Message = &m
	}
	var who email.Sender
	if json.Unmarshal(p.Actor, &who) == nil {
		out.RequestedBy = SendRequester{AgentID: optional(who.AgentID), RunID: optional(who.RunID), UserID: optional(who.UserID)}
	}
	if p.Error != "" {
		e := p.Error
		out.Error = &e
		if p.Outcome == domain.OutcomeFailed && suppressedSend(p.Error) {
			code := CodeRecipientSuppressed
			out.ErrorCode, out.ErrorDetails = &code, suppressionDetails(p.CompanyID)
		}
	}
	if p.ProviderMessageID != "" {
		m := p.ProviderMessageID
		out.ProviderMessageID = &m
	}
	return out
}

func isNotFound(err error) bool { return errors.Is(err, store.ErrNotFound) }

// systemActor is the worker's identity in the audit log.
var systemActor = authz.Actor{}
