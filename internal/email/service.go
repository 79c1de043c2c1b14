// Package email is the AgentMail email channel: saved credentials with their
// human grants and agent access, inbox setup and lifecycle (this file set),
// and the checks later pipelines call before intake and sending.
package email

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/paperclipai/paperclipai/internal/agentmail"
	"github.com/paperclipai/paperclipai/internal/authz"
	"github.com/paperclipai/paperclipai/internal/config"
	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/inbound/queue"
	"github.com/paperclipai/paperclipai/internal/notify"
	"github.com/paperclipai/paperclipai/internal/store"
	"github.com/paperclipai/paperclipai/internal/vault"
)

// Secret binding targets and config paths.
const (
	TargetConnection  = "email_connection"
	TargetEndpoint    = "email_endpoint"
	PathControlKey    = "credentials.controlKey"
	PathAPIKey        = "credentials.apiKey"
	PathWebhookSecret = "credentials.webhookSecret"
)

// Options configure the email channel.
type Options struct {
	Store  *store.Store
	Vault  *vault.Vault
	Authz  *authz.Service
	Config config.Config
	Log    *slog.Logger
	// Client is the provider client without a key; calls derive keyed
	// clients with WithAPIKey.
	Client *agentmail.Client
	// Holder names this process in leases.
	Holder string
	// WorkLeaseTTL bounds setup/control operations (default 2 minutes).
	WorkLeaseTTL time.Duration
	// Changed are signalled after an inbox starts or stops (setup,
	// reconnect, pause, resume, disconnect): the receiving and sending
	// workers' work signals, which then look at the inbox again.
	Changed []notify.Signal
	// Disconnected, when set, runs inside the transaction that archives an
	// inbox, after the archive; the send side settles the inbox's
	// unfinished sends there, so none is left queued on a disconnected
	// inbox.
	Disconnected func(ctx context.Context, tx *sql.Tx, endpointID string) error
	// RulesChanged is signalled after an inbox's sender rules change; the
	// RulesWorker waits on it (New makes one when unset).
	RulesChanged notify.Signal
	// BounceRateHigh, when set, is called by the RulesWorker when an
	// inbox's bounce rate over its last BounceWindow sends crosses
	// BounceRateLimit (its health turns to attention, code
	// bounce_rate_high): the place to emit an inbox.bounce_rate_high
	// notification event.
	BounceRateHigh func(ctx context.Context, endpointID string, sends, bounced int)
}

// Service is the email channel's core: credentials and their grants,
// inbox setup and lifecycle, and the checks the receiving and sending
// pipelines call before they act (ActiveEndpoint, CheckActive).
type Service struct {
	Options
	// rulesEpoch counts local sender rules changes; the rules worker
	// compares it to learn that a round was woken by one.
	rulesEpoch atomic.Int64
}

// New returns a Service; o.Client must be configured with the provider
// base URL.
func New(o Options) *Service {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.WorkLeaseTTL <= 0 {
		o.WorkLeaseTTL = 2 * time.Minute
	}
	if o.RulesChanged == nil {
		o.RulesChanged = notify.New()
	}
	return &Service{Options: o}
}

// changed signals the pipelines that an inbox started or stopped.
func (s *Service) changed() {
	for _, c := range s.Changed {
		c.Notify()
	}
	// The other replicas' workers learn it at once too (queue.Broadcast),
	// instead of at their next safety rescan. A failure is only logged:
	// every worker rescans within a minute anyway.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := queue.Broadcast(ctx, s.Store.DB); err != nil {
		s.Log.Warn("announce an inbox change", "err", err)
	}
}

// providerError turns a provider failure into the email routes' refusal
// (docs/email-setup.md, "Provider errors"); other errors pass through unchanged.
func providerError(err error) error {
	if err == nil {
		return nil
	}
	if p, ok := agentmail.ProblemFor(err); ok {
		details := map[string]any{"code": p.Details.Code, "providerStatus": p.Details.ProviderStatus, "operation": p.Details.Operation}
		if p.Details.Field != "" {
			details["field"] = p.Details.Field
		}
		return &domain.Refusal{Kind: problemKind(p.Status), Message: p.Message, Code: p.Code, Details: details,
			RetryAfter: time.Duration(p.RetryAfterSeconds) * time.Second}
	}
	// No provider answer to quote: the details still say which operation
	// failed and how (the fixed reason names, never the provider URL).
	var ne *agentmail.NetworkError
	if errors.As(err, &ne) {
		return &domain.Refusal{Kind: domain.KindUpstream, Message: "AgentMail could not be reached. Try again in a moment.", Code: agentmail.ProblemRequestFailed,
			Details: map[string]any{"operation": ne.Operation, "reason": ne.Reason}}
	}
	var re *agentmail.ResponseError
	if errors.As(err, &re) {
		return &domain.Refusal{Kind: domain.KindUpstream, Message: "AgentMail returned an unexpected response. Try again in a moment.", Code: agentmail.ProblemRequestFailed,
			Details: map[string]any{"operation": re.Operation, "providerStatus": re.Status, "reason": "unexpected_response"}}
	}
	return err
}

// problemKind is the refusal kind of a provider problem's status
// (agentmail.ProblemFor chooses 409, 422, 429 or 502); a status without a
// kind of its own is unprocessable, the problems' default.
func problemKind(status int) domain.RefusalKind {
	switch status {
	case http.StatusBadRequest:
		return domain.KindInvalid
	case http.StatusForbidden:
		return domain.KindForbidden
	case http.StatusNotFound:
		return domain.KindNotFound
	case http.StatusConflict:
		return domain.KindConflict
	case http.StatusRequestEntityTooLarge:
		return domain.KindTooLarge
	case http.StatusTooManyRequests:
		return domain.KindRateLimited
	case http.StatusBadGateway:
		return domain.KindUpstream
	case http.StatusServiceUnavailable:
		return domain.KindUnavailable
	}
	return domain.KindUnprocessable
}

// publicMessage is the text of err a person may see: a refusal's message,
// else fallback (an internal error's text is never shown).
func publicMessage(err error, fallback string) string {
	if r, ok := domain.AsRefusal(err); ok {
		return r.Message
	}
	return fallback
}

// keyed returns a provider client using key.
func (s *Service) keyed(key string) *agentmail.Client { return s.Client.WithAPIKey(key) }

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// RequireEnabled is the email channel's gate (the experimental switch
// experimental.enableChatConnectors, and any later gate): every email
// route and every service operation an agent reaches through another
// transport (the MCP tools, the sandbox bridge) checks it, so no
// transport can skip it.
func (s *Service) RequireEnabled(ctx context.Context) error {
	st, err := s.Store.GetSettings(ctx, s.Store.DB)
	if err != nil {
		return err
	}
	if !st.Experimental.EnableChatConnectors {
		return &domain.Refusal{Kind: domain.KindForbidden, Code: "email_connections_disabled",
			Message: `Email connections are experimental and turned off. An instance administrator can enable them with PATCH /api/instance/settings {"experimental":{"enableChatConnectors":true}}.`}
	}
	return nil
}

// requireManager checks the actor is a connection manager of companyID:
// a board user with company access who is the local board, an instance
// administrator, or holds tools:manage_connections.
func (s *Service) requireManager(ctx context.Context, q db.Querier, a authz.Actor, companyID string, notFoundMsg string) error {
	if err := authz.RequireBoard(a); err != nil {
		return err
	}
	acc, err := s.Authz.CompanyAccess(ctx, q, a, companyID, false)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) && notFoundMsg != "" {
			return &domain.Refusal{Kind: domain.KindNotFound, Message: notFoundMsg}
		}
		return err
	}
	if a.LocalBoard || a.IsInstanceAdmin || authz.HasPermission(acc, domain.PermManageConnections) {
		if acc.Role == domain.RoleViewer {
			return &domain.Refusal{Kind: domain.KindForbidden, Message: "Missing permission: " + domain.PermManageConnections}
		}
		return nil
	}
	return &domain.Refusal{Kind: domain.KindForbidden, Message: "Missing permission: " + domain.PermManageConnections}
}

// bindSecret binds secretID to a target's config path.
func (s *Service) bindSecret(ctx context.Context, q db.Querier, companyID, secretID, targetType, targetID, path string) error {
	return s.Store.PutBinding(ctx, q, &domain.SecretBinding{CompanyID: companyID, SecretID: secretID, TargetType: targetType,
		TargetID: targetID, ConfigPath: path, Required: true})
}

// boundSecret returns the secret id bound at a target's path, or "".
func (s *Service) boundSecret(ctx context.Context, q db.Querier, targetType, targetID, path string) (string, error) {
	bs, err := s.Store.ListBindings(ctx, q, targetType, targetID)
	if err != nil {
		return "", err
	}
	for _, b := range bs {
		if b.ConfigPath == path {
			return b.SecretID, nil
		}
	}
	return "", nil
}

// resolveBound returns the value of the secret bound at a target's path.
func (s *Service) resolveBound(ctx context.Context, q db.Querier, targetType, targetID, path string) (string, error) {
	v, err := s.Vault.ResolveAt(ctx, q, targetType, targetID, path)
	if errors.Is(err, store.ErrNotFound) {
		return "", fmt.Errorf("%s: %w", path, errNoSecret)
	}
	return string(v), err
}

var errNoSecret = errors.New("credential is not available")

// vaultKey stores key as a new company secret and returns its id.
func (s *Service) vaultKey(ctx context.Context, q db.Querier, companyID, label, key string) (string, error) {
	sec, err := s.Vault.CreateSecret(ctx, q, companyID, fmt.Sprintf("%s %s", label, randomHex(4)), []byte(key))
	if err != nil {
		return "", err
	}
	return sec.ID, nil
}

// unbindAndCollect removes every binding of a target and deletes each
// formerly bound secret no other binding still references.
func (s *Service) unbindAndCollect(ctx context.Context, tx *sql.Tx, targetType, targetID string) error {
	ids, err := s.Store.DeleteBindings(ctx, tx, targetType, targetID)
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] {
			continue
		}
		seen[id] = true
		if _, err := s.Vault.DeleteIfUnreferenced(ctx, tx, id); err != nil {
			return err
		}
	}
	return nil
}

// WebhookSecret returns the vaulted Svix signing secret of an endpoint's
// Paperclip-owned webhook, for verifying its deliveries. A missing secret is
// an error that never quotes the value.
func (s *Service) WebhookSecret(ctx context.Context, q db.Querier, endpointID string) (string, error) {
	return s.resolveBound(ctx, q, TargetEndpoint, endpointID, PathWebhookSecret)
}
