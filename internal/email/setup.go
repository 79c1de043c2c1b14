package email

import (
	"context"
	"database/sql"
	"errors"
	"net/http"
	"net/mail"
	"regexp"
	"strings"

	"github.com/paperclipai/paperclipai/internal/agentmail"
	"github.com/paperclipai/paperclipai/internal/authz"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/inbound/queue"
	"github.com/paperclipai/paperclipai/internal/store"
)

// DefaultDomain is the provider's shared inbox domain.
const DefaultDomain = "agentmail.to"

// webhookEvents are the events a Paperclip-owned webhook subscribes to.
var webhookEvents = []string{"message.received", "message.sent", "message.delivered", "message.bounced", "message.complained", "message.rejected"}

var usernameRE = regexp.MustCompile(`^[a-zA-Z0-9._-]+$`)

// SetupInput creates or attaches an inbox for an agent. IdempotencyKey is the
// setup request id and becomes the endpoint id, so a retry resumes.
type SetupInput struct {
	AssignedAgentID        string `json:"assignedAgentId"`
	ApplicationID          string `json:"applicationId,omitempty"`
	APIKey                 string `json:"apiKey,omitempty"`
	CredentialConnectionID string `json:"credentialConnectionId,omitempty"`
	InboxID                string `json:"inboxId,omitempty"`
	Username               string `json:"username,omitempty"`
	Domain                 string `json:"domain,omitempty"`
	ReceiveMode            string `json:"receiveMode,omitempty"`
	// SendReview sets the new inbox's review mode (off, new_recipients,
	// all); empty takes the default: new_recipients for a low-trust agent,
	// off otherwise (docs/email-setup.md, "6a. Review before send").
	SendReview     string `json:"sendReview,omitempty"`
	IdempotencyKey string `json:"idempotencyKey"`
}

func (in *SetupInput) validate() error {
	if !store.ValidID(in.AssignedAgentID) {
		return domain.Refuse(domain.KindInvalid, "assignedAgentId must be a UUID")
	}
	if in.ApplicationID != "" && !store.ValidID(in.ApplicationID) {
		return domain.Refuse(domain.KindInvalid, "applicationId must be a UUID")
	}
	if (in.APIKey == "") == (in.CredentialConnectionID == "") {
		return domain.Refuse(domain.KindInvalid, "AgentMail API key required: give exactly one of apiKey or credentialConnectionId")
	}
	if in.APIKey != "" {
		if err := checkAPIKey(in.APIKey); err != nil {
			return err
		}
	}
	if in.CredentialConnectionID != "" && !store.ValidID(in.CredentialConnectionID) {
		return domain.Refuse(domain.KindInvalid, "credentialConnectionId must be a UUID")
	}
	if in.InboxID != "" {
		a, err := mail.ParseAddress(in.InboxID)
		if err != nil || a.Address != in.InboxID {
			return domain.Refuse(domain.KindInvalid, "inboxId must be an email address")
		}
		in.InboxID = strings.ToLower(in.InboxID)
	}
	if in.Username != "" && (len(in.Username) > 64 || !usernameRE.MatchString(in.Username)) {
		return domain.Refuse(domain.KindInvalid, "username may contain letters, digits, dot, underscore and hyphen (at most 64)")
	}
	if err := checkDomain(in.Domain); err != nil {
		return err
	}
	in.Domain = strings.ToLower(in.Domain)
	if in.ReceiveMode == "" {
		in.ReceiveMode = domain.ReceiveWebSocket
	}
	if in.ReceiveMode != domain.ReceiveWebSocket && in.ReceiveMode != domain.ReceiveWebhook {
		return domain.Refuse(domain.KindInvalid, "receiveMode must be websocket or webhook")
	}
	if !store.ValidID(in.IdempotencyKey) {
		return domain.Refuse(domain.KindInvalid, "idempotencyKey must be a UUID")
	}
	switch in.SendReview {
	case "", "off", "new_recipients", "all":
	default:
		return domain.Refuse(domain.KindInvalid, "sendReview must be off, new_recipients or all")
	}
	return nil
}

// Summary returns an endpoint's API shape with the standard-agent warning
// and its health.
func (s *Service) Summary(ctx context.Context, e domain.EmailEndpoint) domain.EmailEndpointSummary {
	return s.Summaries(ctx, []domain.EmailEndpoint{e})[0]
}

// Summaries is Summary for many endpoints, their health read together.
func (s *Service) Summaries(ctx context.Context, eps []domain.EmailEndpoint) []domain.EmailEndpointSummary {
	in := s.readHealth(ctx, eps)
	agents := map[string]domain.Agent{}
	out := make([]domain.EmailEndpointSummary, len(eps))
	for i, e := range eps {
		sum := e.Summary()
		ag, ok := agents[e.AssignedAgentID]
		if !ok {
			if a, err := s.Store.GetAgent(ctx, s.Store.DB, e.AssignedAgentID); err == nil {
				ag, ok = a, true
				agents[e.AssignedAgentID] = a
			}
		}
		if ok {
			sum.StandardAgentWarning = ag.Permissions.TrustPreset != domain.TrustLowTrustReview
		}
		s.health(ctx, e, in, &sum)
		s.bounceHealth(ctx, e, &sum)
		out[i] = sum
	}
	return out
}

// Setup creates or attaches an inbox for an agent (docs/email-setup.md, "3. Give an agent an email address"). Every
// step is resumable by the request id: a retry after a failure at any step
// reuses what earlier attempts created and ends with exactly one provider
// inbox, one runtime key and one endpoint.
func (s *Service) Setup(ctx context.Context, a authz.Actor, companyID string, in SetupInput) (domain.EmailEndpointSummary, error) {
	if err := in.validate(); err != nil {
		return domain.EmailEndpointSummary{}, err
	}
	ag, err := s.checkAgent(ctx, s.Store.DB, companyID, in.AssignedAgentID)
	if err != nil {
		return domain.EmailEndpointSummary{}, err
	}
	ep, err := s.ensureDraft(ctx, a, companyID, ag, in)
	if err != nil {
		return domain.EmailEndpointSummary{}, err
	}
	switch {
	case ep.Status == domain.EndpointArchived:
		return domain.EmailEndpointSummary{}, domain.Refuse(domain.KindConflict, "This inbox was disconnected; create a new connection")
	case in.InboxID != "" && ep.Address != "" && !strings.EqualFold(in.InboxID, ep.Address):
		return domain.EmailEndpointSummary{}, domain.Refuse(domain.KindConflict, "Reconnect cannot change the inbox identity")
	case ep.Status == domain.EndpointActive:
		return s.Summary(ctx, ep), nil
	}
	var out domain.EmailEndpointSummary
	err = s.withWorkLease(ctx, ep, "Inbox setup is already running", func() error {
		var err error
		out, err = s.runSetup(ctx, a, ep.ID, ag, in)
		return err
	})
	if err != nil {
		// The draft stays, listed as "Setup incomplete" with this reason
		// until a retry succeeds or it is discarded.
		msg := publicMessage(err, "an internal error occurred; see the server log")
		if rerr := s.Store.RecordEndpointProblem(context.WithoutCancel(ctx), s.Store.DB, ep.ID, ProblemSetupFailed, msg); rerr != nil {
			s.Log.Warn("record setup failure", "endpoint", ep.ID, "err", rerr)
		}
	}
	return out, err
}

// ensureDraft creates the draft endpoint on the first call of a request id.
func (s *Service) ensureDraft(ctx context.Context, a authz.Actor, companyID string, ag domain.Agent, in SetupInput) (domain.EmailEndpoint, error) {
	var ep domain.EmailEndpoint
	err := s.Store.Tx(ctx, func(tx *sql.Tx) error {
		existing, err := s.Store.GetEndpoint(ctx, tx, in.IdempotencyKey)
		if err == nil {
			if existing.CompanyID != companyID || existing.AssignedAgentID != ag.ID {
				return domain.Refuse(domain.KindConflict, "Setup request already belongs to another inbox")
			}
			ep = existing
			return nil
		}
		if !errors.Is(err, store.ErrNotFound) {
			return err
		}
		ep = domain.EmailEndpoint{ID: in.IdempotencyKey, CompanyID: companyID, AssignedAgentID: ag.ID, SponsorUserID: a.UserID,
			DisplayName: ag.Name, ReceiveMode: in.ReceiveMode, Status: domain.EndpointDraft}
		created, err := s.Store.InsertEndpoint(ctx, tx, &ep)
		if err != nil {
			return err
		}
		if !created {
			return domain.Refuse(domain.KindConflict, "Setup request already belongs to another inbox")
		}
		// The inbox's send policy starts with the draft: a low-trust agent's
		// mail to people it never wrote with waits for a person by default.
		review := in.SendReview
		if review == "" && ag.Permissions.TrustPreset == domain.TrustLowTrustReview {
			review = "new_recipients"
		}
		if review != "" && review != "off" {
			if err := s.Store.PutSendPolicy(ctx, tx, &store.SendPolicy{EndpointID: ep.ID, CompanyID: companyID, Review: review,
				ReviewExpiresHours: store.DefaultReviewExpiresHours}, true); err != nil {
				return err
			}
		}
		return s.Store.Audit(ctx, tx, a.AuditActor(), companyID, "email_endpoint.draft_created", "email_endpoint", ep.ID, map[string]any{"agentId": ag.ID})
	})
	return ep, err
}

// withWorkLease runs fn holding the endpoint's email-work lease.
func (s *Service) withWorkLease(ctx context.Context, ep domain.EmailEndpoint, busyMsg string, fn func() error) error {
	l, _, err := s.Store.TryLease(ctx, s.Store.DB, ep.CompanyID, ep.ID, store.LeaseKeyWork, s.Holder, s.WorkLeaseTTL)
	if err != nil {
		return err
	}
	if l == nil {
		return domain.Refuse(domain.KindConflict, "%s", busyMsg)
	}
	defer func() { _ = l.Release(ctx) }()
	return fn()
}

// controlKey vaults or binds the endpoint's control key and returns it.
func (s *Service) controlKey(ctx context.Context, a authz.Actor, ep domain.EmailEndpoint, ag domain.Agent, in SetupInput) (string, error) {
	var key string
	err := s.Store.Tx(ctx, func(tx *sql.Tx) error {
		current, err := s.boundSecret(ctx, tx, TargetEndpoint, ep.ID, PathControlKey)
		if err != nil {
			return err
		}
		if in.CredentialConnectionID != "" {
			c, err := s.loadConnection(ctx, tx, ep.CompanyID, in.CredentialConnectionID)
			if err != nil {
				return err
			}
			if key, err = s.credentialAccess(ctx, tx, a, c); err != nil {
				return err
			}
			secretID, err := s.boundSecret(ctx, tx, TargetConnection, c.ID, PathControlKey)
			if err != nil {
				return err
			}
			// Bind the saved credential's own secret: disconnect later
			// removes only this binding, and the shared secret survives.
			if current != secretID {
				if err := s.bindSecret(ctx, tx, ep.CompanyID, secretID, TargetEndpoint, ep.ID, PathControlKey); err != nil {
					return err
				}
				if current != "" {
					if _, err := s.Vault.DeleteIfUnreferenced(ctx, tx, current); err != nil {
						return err
					}
				}
			}
			// The assigned agent gets access to the credential only when
			// the inbox activates (activate), so a failed setup leaves no
			// agent holding it.
			return s.Store.SetEndpointCredential(ctx, tx, ep.ID, c.ID)
		}
		key = in.APIKey
		if current != "" {
			if v, err := s.Vault.Resolve(ctx, tx, current, 0); err == nil && string(v) == key {
				return nil
			}
		}
		secretID, err := s.vaultKey(ctx, tx, ep.CompanyID, "AgentMail API key", key)
		if err != nil {
			return err
		}
		if err := s.bindSecret(ctx, tx, ep.CompanyID, secretID, TargetEndpoint, ep.ID, PathControlKey); err != nil {
			return err
		}
		if current != "" {
			if _, err := s.Vault.DeleteIfUnreferenced(ctx, tx, current); err != nil {
				return err
			}
		}
		if err := s.Store.SetEndpointCredential(ctx, tx, ep.ID, ""); err != nil {
			return err
		}
		return nil
	})
	return key, err
}

func (s *Service) runSetup(ctx context.Context, a authz.Actor, endpointID string, ag domain.Agent, in SetupInput) (domain.EmailEndpointSummary, error) {
	var zero domain.EmailEndpointSummary
	ep, err := s.Store.GetEndpoint(ctx, s.Store.DB, endpointID)
	if err != nil {
		return zero, err
	}
	key, err := s.controlKey(ctx, a, ep, ag, in)
	if err != nil {
		return zero, err
	}
	// controlKey wrote credential_connection_id; reload so the full-row
	// update below does not write a stale value back.
	if ep, err = s.Store.GetEndpoint(ctx, s.Store.DB, endpointID); err != nil {
		return zero, err
	}
	control := s.keyed(key)
	ident, err := control.InspectKey(ctx)
	if err != nil {
		return zero, providerError(err)
	}
	inboxScoped := ident.ScopeType == agentmail.ScopeInbox
	target := ep.Address
	if target == "" {
		target = in.InboxID
	}
	if target == "" && inboxScoped {
		target = strings.ToLower(ident.InboxID)
	}
	if inboxScoped && target != "" && !strings.EqualFold(target, ident.InboxID) {
		return zero, domain.Refuse(domain.KindForbidden, "API key belongs to a different inbox")
	}
	var inbox *agentmail.Inbox
	if target != "" {
		if inbox, err = control.GetInbox(ctx, target); err != nil {
			return zero, providerError(err)
		}
	} else {
		dom := in.Domain
		if dom != "" && dom != DefaultDomain {
			if err := s.requireVerifiedDomain(ctx, control, dom); err != nil {
				return zero, err
			}
		}
		req := agentmail.CreateInboxRequest{Username: in.Username, DisplayName: ag.Name, ClientID: "paperclip-" + ep.ID}
		if dom != DefaultDomain {
			req.Domain = dom
		}
		if inbox, err = control.CreateInbox(ctx, req); err != nil {
			return zero, providerError(err)
		}
	}
	address := strings.ToLower(inbox.InboxID)
	// Persist the address before any key exists, so a later failure leaves a
	// resumable draft bound to this inbox.
	if ep.Address == "" {
		ep.Address, ep.ProviderAccountID, ep.DisplayName = address, ident.OrganizationID, ag.Name
		if err := s.Store.UpdateEndpoint(ctx, s.Store.DB, &ep); err != nil {
			if errors.Is(err, store.ErrConflict) {
				return zero, domain.Refuse(domain.KindConflict, "This AgentMail inbox already has a Paperclip owner")
			}
			return zero, err
		}
	}
	if err := s.ensureRuntimeKey(ctx, control, &ep, inboxScoped); err != nil {
		return zero, err
	}
	runtimeKey, err := s.resolveBound(ctx, s.Store.DB, TargetEndpoint, ep.ID, PathAPIKey)
	if err != nil {
		return zero, err
	}
	rident, err := s.keyed(runtimeKey).InspectKey(ctx)
	if err != nil {
		return zero, providerError(err)
	}
	if rident.ScopeType != agentmail.ScopeInbox || !strings.EqualFold(rident.InboxID, ep.Address) {
		return zero, domain.Refuse(domain.KindForbidden, "Runtime credential must be scoped to this inbox")
	}
	if in.ReceiveMode == domain.ReceiveWebhook && ep.WebhookID == "" {
		if err := s.registerWebhook(ctx, control, &ep); err != nil {
			return zero, err
		}
	}
	if err := s.activate(ctx, a, &ep, in.ReceiveMode, ag.ID); err != nil {
		return zero, err
	}
	return s.Summary(ctx, ep), nil
}

// requireVerifiedDomain refuses custom domains that are not VERIFIED.
func (s *Service) requireVerifiedDomain(ctx context.Context, c *agentmail.Client, name string) error {
	list, err := allDomains(ctx, c)
	if err != nil {
		return providerError(err)
	}
	for _, d := range list {
		if strings.EqualFold(d.Domain, name) {
			full, err := c.GetDomain(ctx, d.DomainID)
			if err != nil {
				return providerError(err)
			}
			if full.Verified() {
				return nil
			}
			break
		}
	}
	return domain.Refuse(domain.KindInvalid, "Verify this custom domain in AgentMail before creating an inbox")
}

// ensureRuntimeKey makes sure the endpoint has an inbox-scoped runtime key:
// Paperclip creates and owns one for organization/pod keys; an inbox key is
// its own runtime key.
func (s *Service) ensureRuntimeKey(ctx context.Context, control *agentmail.Client, ep *domain.EmailEndpoint, inboxScoped bool) error {
	existing, err := s.boundSecret(ctx, s.Store.DB, TargetEndpoint, ep.ID, PathAPIKey)
	if err != nil {
		return err
	}
	if existing != "" {
		return nil
	}
	if inboxScoped {
		return s.Store.Tx(ctx, func(tx *sql.Tx) error {
			controlSecret, err := s.boundSecret(ctx, tx, TargetEndpoint, ep.ID, PathControlKey)
			if err != nil {
				return err
			}
			return s.bindSecret(ctx, tx, ep.CompanyID, controlSecret, TargetEndpoint, ep.ID, PathAPIKey)
		})
	}
	created, err := control.CreateInboxAPIKey(ctx, ep.Address, agentmail.CreateAPIKeyRequest{Name: "Paperclip email runtime"})
	if err != nil {
		return providerError(err)
	}
	err = s.saveProviderSecret(ctx, ep, "AgentMail runtime key", created.APIKey, PathAPIKey,
		func(tx *sql.Tx) error { return s.Store.SetEndpointOwnedKey(ctx, tx, ep.ID, created.APIKeyID) },
		"runtime key", func(ctx context.Context) error { return control.DeleteInboxAPIKey(ctx, ep.Address, created.APIKeyID) })
	if err != nil {
		return err
	}
	ep.OwnedAPIKeyID = created.APIKeyID
	return nil
}

// registerWebhook registers the Paperclip-owned webhook and persists its id
// and signing secret; if persisting fails the webhook is deleted again.
func (s *Service) registerWebhook(ctx context.Context, control *agentmail.Client, ep *domain.EmailEndpoint) error {
	base := s.Config.PublicURL
	// The configuration allows a plain-HTTP public URL only on loopback
	// with --insecure-local-webhooks (the local emulator).
	if !strings.HasPrefix(base, "https://") && !(s.Config.InsecureLocalWebhooks && strings.HasPrefix(base, "http://")) {
		return domain.Refuse(domain.KindInvalid, "Webhook receiving requires a public HTTPS URL; use WebSocket for local setup")
	}
	wh, err := control.CreateInboxWebhook(ctx, ep.Address, agentmail.CreateWebhookRequest{
		URL: base + queue.WebhookPath + ep.PublicID, EventTypes: webhookEvents, ClientID: "paperclip-" + ep.ID})
	if err != nil {
		if pe, ok := agentmail.ProblemFor(err); ok && pe.Details.ProviderStatus == http.StatusForbidden {
			return &domain.Refusal{Kind: domain.KindUnprocessable, Code: agentmail.ProblemRequestFailed,
				Message: "AgentMail did not allow Paperclip to register a webhook. Enable webhook create/read/delete permissions for this API key, or use WebSocket receiving.",
				Details: map[string]any{"code": pe.Details.Code, "providerStatus": pe.Details.ProviderStatus, "operation": pe.Details.Operation}}
		}
		return providerError(err)
	}
	err = s.saveProviderSecret(ctx, ep, "AgentMail webhook secret", wh.Secret, PathWebhookSecret,
		func(tx *sql.Tx) error { return s.Store.SetEndpointWebhook(ctx, tx, ep.ID, wh.WebhookID) },
		"webhook", func(ctx context.Context) error { return control.DeleteInboxWebhook(ctx, ep.Address, wh.WebhookID) })
	if err != nil {
		return err
	}
	ep.WebhookID = wh.WebhookID
	return nil
}

// saveProviderSecret stores a secret the provider just made for the
// endpoint: vaulted as name, bound at path, and the provider object's id
// recorded by record, in one transaction. When that fails the provider
// object (what) is deleted again with undo, so no provider key or webhook
// is left that Paperclip can no longer name.
func (s *Service) saveProviderSecret(ctx context.Context, ep *domain.EmailEndpoint, name, value, path string,
	record func(tx *sql.Tx) error, what string, undo func(context.Context) error) error {
	err := s.Store.Tx(ctx, func(tx *sql.Tx) error {
		secretID, err := s.vaultKey(ctx, tx, ep.CompanyID, name, value)
		if err != nil {
			return err
		}
		if err := s.bindSecret(ctx, tx, ep.CompanyID, secretID, TargetEndpoint, ep.ID, path); err != nil {
			return err
		}
		return record(tx)
	})
	if err != nil {
		if derr := undo(context.WithoutCancel(ctx)); derr != nil {
			s.Log.Warn("could not delete "+what+" after a failed save", "endpoint", ep.ID, "err", derr)
		}
		return err
	}
	return nil
}

// activate makes the endpoint active in one transaction. The activation
// time (the intake cutoff) is set once and kept across reconnects. An
// endpoint set up from a saved credential gives the assigned agent access
// to that credential in the same transaction: only a setup that succeeds
// grants it.
func (s *Service) activate(ctx context.Context, a authz.Actor, ep *domain.EmailEndpoint, mode, agentID string) error {
	err := s.Store.Tx(ctx, func(tx *sql.Tx) error {
		cur, err := s.Store.GetEndpoint(ctx, tx, ep.ID)
		if err != nil {
			return err
		}
		if cur.CredentialConnectionID != "" {
			c, err := s.loadConnection(ctx, tx, cur.CompanyID, cur.CredentialConnectionID)
			if err != nil {
				return err
			}
			if err := s.allowAgent(ctx, tx, a, c, agentID, cur.ID); err != nil {
				return err
			}
		}
		if err := s.Store.ClearEndpointProblem(ctx, tx, cur.ID, ""); err != nil {
			return err
		}
		now := s.Store.Now()
		cur.ReceiveMode = mode
		if cur.ActivationAt == nil {
			cur.ActivationAt = &now
		}
		if cur.SyncCheckpoint == nil {
			cur.SyncCheckpoint = cur.ActivationAt
		}
		cur.LastSyncAt = nil
		cur.Status = domain.EndpointActive
		cur.ActivatedAt = &now
		cur.HealthMessage = "Connected"
		cur.LastError = ""
		if err := s.Store.UpdateEndpoint(ctx, tx, &cur); err != nil {
			return err
		}
		*ep = cur
		return s.Store.Audit(ctx, tx, a.AuditActor(), ep.CompanyID, "email_endpoint.connected", "email_endpoint", ep.ID,
			map[string]any{"address": ep.Address, "receiveMode": mode})
	})
	if err != nil {
		return err
	}
	s.changed()
	return nil
}
