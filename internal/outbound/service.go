package outbound

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/paperclipai/paperclipai/internal/agentmail"
	"github.com/paperclipai/paperclipai/internal/attachment"
	"github.com/paperclipai/paperclipai/internal/authz"
	"github.com/paperclipai/paperclipai/internal/config"
	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/email"
	"github.com/paperclipai/paperclipai/internal/httpx"
	"github.com/paperclipai/paperclipai/internal/policy"
	"github.com/paperclipai/paperclipai/internal/store"
)

// Send outcomes.
const (
	OutcomeQueued    = "queued"
	OutcomeSent      = "sent"
	OutcomeDelivered = "delivered"
	OutcomeFailed    = "failed"
	OutcomeUncertain = "uncertain"
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

// Admitter hands a synthetic provider event to the inbound queue (the sent
// message is then imported as thread context).
type Admitter func(ctx context.Context, endpointID string, ev agentmail.Event) error

// Service accepts and executes explicit email actions.
type Service struct {
	Store  *store.Store
	Email  *email.Service
	Authz  *authz.Service
	Policy *policy.Service
	Config config.Config
	Log    *slog.Logger
	Client *agentmail.Client
	Holder string
	// Attachments is the content-addressed store the selected attachments
	// are read from.
	Attachments attachment.Store
	// Admit, when set, admits the synthetic message.sent after a send.
	Admit Admitter
	// LeaseTTL is the per-thread lease time. It is not renewed: one attempt
	// is bounded by the provider timeout (25 s), far below the default 90 s.
	LeaseTTL time.Duration
	// Concurrency bounds sends executing at once in this process.
	Concurrency int
	// Observe, when set, is told each accepted→sent latency.
	Observe func(acceptToSent time.Duration)

	signal chan struct{}
	now    func() time.Time
}

// New returns a Service.
func New(st *store.Store, em *email.Service, az *authz.Service, pol *policy.Service, cfg config.Config, client *agentmail.Client, log *slog.Logger, holder string) *Service {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Service{Store: st, Email: em, Authz: az, Policy: pol, Config: cfg, Log: log, Client: client, Holder: holder,
		Attachments: attachment.Store{Dir: cfg.AttachmentsDir(), MaxBytes: cfg.AttachmentMaxBytes, Allowed: cfg.AllowedAttachments},
		LeaseTTL:    90 * time.Second, Concurrency: 4, signal: make(chan struct{}, 1), now: time.Now}
}

// Notify wakes the worker (call after committing new send work).
func (s *Service) Notify() {
	select {
	case s.signal <- struct{}{}:
	default:
	}
}

// Actor is the stored identity of a send's requester.
type Actor struct {
	UserID        string `json:"userId,omitempty"`
	AgentID       string `json:"agentId,omitempty"`
	RunID         string `json:"runId,omitempty"`
	LocalImplicit bool   `json:"localImplicit,omitempty"`
}

// ActorFrom converts a request actor.
func ActorFrom(a authz.Actor) Actor {
	if a.Kind == authz.KindAgent {
		return Actor{AgentID: a.AgentID(), RunID: a.RunID()}
	}
	return Actor{UserID: a.UserID, LocalImplicit: a.LocalBoard}
}

// authzActor rebuilds an authz actor for audit and policy decisions.
func (s *Service) authzActor(ctx context.Context, q db.Querier, a Actor) authz.Actor {
	if a.AgentID != "" {
		ag, err := s.Store.GetAgent(ctx, q, a.AgentID)
		if err != nil {
			ag = domain.Agent{ID: a.AgentID}
		}
		return authz.Actor{Kind: authz.KindAgent, Agent: &ag, Run: &domain.Run{ID: a.RunID}, RunHeaderMatches: true}
	}
	return authz.Actor{Kind: authz.KindBoard, UserID: a.UserID, LocalBoard: a.LocalImplicit}
}

func forbidden(msg string) error { return &httpx.Error{Status: http.StatusForbidden, Message: msg} }

// authorize applies the authority chain of reference §6.3 step 3 for the
// source task. accepting=true additionally requires the agent's run to be
// running and bound to the task.
func (s *Service) authorize(ctx context.Context, q db.Querier, a Actor, ep domain.EmailEndpoint, task domain.Issue, accepting bool) error {
	if task.CompanyID != ep.CompanyID {
		return &httpx.Error{Status: http.StatusNotFound, Message: "Task not found"}
	}
	switch {
	case a.UserID != "":
		if ep.CredentialConnectionID != "" && !a.LocalImplicit {
			grants, err := s.Store.ListEmailGrants(ctx, q, ep.CredentialConnectionID)
			if err != nil {
				return err
			}
			ok := false
			for _, g := range grants {
				ok = ok || (g.Status == "active" && (g.Kind == "organization" || g.SubjectUserID == a.UserID))
			}
			if !ok {
				return forbidden("You do not have access to this AgentMail credential")
			}
		}
		if !a.LocalImplicit {
			u, err := s.Store.GetUser(ctx, q, a.UserID)
			if err != nil {
				return forbidden("Board user no longer has company write access")
			}
			if !u.IsInstanceAdmin {
				m, err := s.Store.GetMembership(ctx, q, ep.CompanyID, a.UserID)
				if err != nil || m.Role == domain.RoleViewer {
					return forbidden("Board user no longer has company write access")
				}
			}
		}
	case a.AgentID != "":
	default:
		return forbidden("An authenticated actor is required")
	}
	if task.Status == domain.IssueCancelled {
		return forbidden("Cancelled tasks cannot send email")
	}
	if a.AgentID == "" {
		return nil
	}
	if a.AgentID != ep.AssignedAgentID || task.AssigneeAgentID != a.AgentID {
		return forbidden("Only the assigned agent can use this inbox for its tasks")
	}
	ag, err := s.Store.GetAgent(ctx, q, a.AgentID)
	if err != nil {
		return forbidden("Agent is not available to send email")
	}
	if ok, err := s.Authz.WithinBoundary(ctx, q, ag, task); err != nil || !ok {
		return forbidden("Only the assigned agent can use this inbox for its tasks")
	}
	if ag.Status != domain.AgentActive ||
		(ag.BudgetMonthlyCents > 0 && ag.SpendPeriod == s.Store.Now().Format("2006-01") && ag.SpentMonthlyCents >= ag.BudgetMonthlyCents) {
		return forbidden("Agent is not available to send email")
	}
	if a.RunID == "" {
		return forbidden("An active task run is required to send email")
	}
	run, err := s.Store.GetRun(ctx, q, a.RunID)
	if err != nil || run.CompanyID != ep.CompanyID || run.AgentID != a.AgentID || run.IssueID != task.ID {
		return forbidden("Email action does not belong to this task run")
	}
	if accepting && (run.Status != domain.RunRunning || (task.ExecutionRunID != run.ID && task.CheckoutRunID != run.ID)) {
		return forbidden("Email action does not belong to this task run")
	}
	return nil
}

// PublicationSummary is the API shape of a send.
type PublicationSummary struct {
	ID                string          `json:"id"`
	IssueID           string          `json:"issueId"`
	ConversationID    string          `json:"conversationId"`
	EndpointID        string          `json:"endpointId"`
	Outcome           string          `json:"outcome"`
	Error             *string         `json:"error"`
	ProviderMessageID *string         `json:"providerMessageId"`
	Request           json.RawMessage `json:"request"`
	CreatedAt         time.Time       `json:"createdAt"`
	// SentAt is when the provider accepted the send; DeliveredAt when its
	// delivery receipt arrived.
	SentAt      *time.Time `json:"sentAt"`
	DeliveredAt *time.Time `json:"deliveredAt"`
}

// Summary presents a publication.
func Summary(p store.EmailPublication) PublicationSummary {
	out := PublicationSummary{ID: p.ID, IssueID: p.IssueID, ConversationID: p.ConversationID, EndpointID: p.EndpointID,
		Outcome: p.Outcome, Request: p.Request, CreatedAt: p.CreatedAt, SentAt: p.PublishedAt, DeliveredAt: p.DeliveredAt}
	if p.Error != "" {
		e := p.Error
		out.Error = &e
	}
	if p.ProviderMessageID != "" {
		m := p.ProviderMessageID
		out.ProviderMessageID = &m
	}
	return out
}

// audit records an email action.
func (s *Service) audit(ctx context.Context, q db.Querier, a authz.Actor, companyID, action, entityID string, details map[string]any) error {
	raw, _ := json.Marshal(details)
	kind := a.Kind
	if kind == "" {
		kind = "system"
	}
	return s.Store.InsertActivity(ctx, q, &domain.Activity{CompanyID: companyID, ActorKind: kind, ActorID: a.ID(),
		AgentID: a.AgentID(), RunID: a.RunID(), Action: action, EntityType: "email_publication", EntityID: entityID, Details: raw})
}

func isNotFound(err error) bool { return errors.Is(err, store.ErrNotFound) }

var _ = sql.ErrNoRows

type policyDecision = policy.Decision

// systemActor is the worker's identity in the audit log.
func systemActor() authz.Actor { return authz.Actor{} }
