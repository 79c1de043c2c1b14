package email

import (
	"context"
	"database/sql"
	"errors"
	"strings"

	"github.com/paperclipai/paperclipai/internal/agentmail"
	"github.com/paperclipai/paperclipai/internal/authz"
	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/store"
)

// Errors of the active-endpoint check, shared by intake and sending.
var (
	// ErrInboxNotActive: the endpoint is not active.
	ErrInboxNotActive = &domain.Refusal{Kind: domain.KindConflict, Message: "This email inbox is not active"}
	// ErrCredentialUnavailable: the runtime credential or saved credential is gone.
	ErrCredentialUnavailable = &domain.Refusal{Kind: domain.KindConflict, Message: "This email inbox credential is unavailable"}
	// ErrAgentAccessRevoked: the assigned agent lost access to the saved credential.
	ErrAgentAccessRevoked = &domain.Refusal{Kind: domain.KindForbidden, Message: "This agent no longer has access to the AgentMail connection"}
)

const cleanupFailedMsg = "Disconnected locally. Provider registrations could not be removed; remove Paperclip's webhook and runtime key in AgentMail."

// ActiveEndpoint loads an endpoint and checks that intake and sending may
// happen now (docs/email-pipeline.md, "The active inbox check"): active, runtime secret present and, for an
// endpoint set up from a saved credential, that credential still active,
// granted, and installed for the assigned agent. It returns the runtime key.
func (s *Service) ActiveEndpoint(ctx context.Context, q db.Querier, endpointID string) (domain.EmailEndpoint, string, error) {
	ep, err := s.Store.GetEndpoint(ctx, q, endpointID)
	if err != nil {
		return ep, "", err
	}
	key, err := s.CheckActive(ctx, q, ep)
	return ep, key, err
}

// CheckActive runs ActiveEndpoint's checks on an endpoint row the caller
// has already read, typically inside its transaction under a share lock,
// and returns the runtime key. It exists so that the inbound worker's
// per-message re-check before a wake does not read the endpoint row a
// second time in the same transaction; the checks themselves are the same.
func (s *Service) CheckActive(ctx context.Context, q db.Querier, ep domain.EmailEndpoint) (string, error) {
	if ep.Status != domain.EndpointActive {
		return "", ErrInboxNotActive
	}
	key, err := s.resolveBound(ctx, q, TargetEndpoint, ep.ID, PathAPIKey)
	if errors.Is(err, errNoSecret) {
		return "", ErrCredentialUnavailable
	}
	if err != nil {
		return "", err
	}
	if ep.CredentialConnectionID != "" {
		c, err := s.Store.GetEmailConnection(ctx, q, ep.CredentialConnectionID)
		if errors.Is(err, store.ErrNotFound) {
			return "", ErrCredentialUnavailable
		}
		if err != nil {
			return "", err
		}
		if c.Status != "active" {
			return "", ErrCredentialUnavailable
		}
		grants, err := s.Store.ListEmailGrants(ctx, q, c.ID)
		if err != nil {
			return "", err
		}
		if !domain.AnyGrantActive(grants) {
			return "", ErrCredentialUnavailable
		}
		ok, err := s.AgentHasAccess(ctx, q, c, ep.AssignedAgentID)
		if err != nil {
			return "", err
		}
		if !ok {
			return "", ErrAgentAccessRevoked
		}
	}
	return key, nil
}

// LoadForManager reads an endpoint and checks the actor manages its company.
func (s *Service) LoadForManager(ctx context.Context, a authz.Actor, endpointID string) (domain.EmailEndpoint, error) {
	ep, err := s.Store.GetEndpoint(ctx, s.Store.DB, endpointID)
	if err != nil {
		return ep, domain.Refuse(domain.KindNotFound, "Email inbox not found")
	}
	return ep, s.requireManager(ctx, s.Store.DB, a, ep.CompanyID, "Email inbox not found")
}

// stopEndpoint pauses intake and sending; it refuses while a thread
// operation holds its lease.
func (s *Service) stopEndpoint(ctx context.Context, tx *sql.Tx, ep *domain.EmailEndpoint) error {
	busy, err := s.Store.ThreadLeaseHeld(ctx, tx, ep.ID)
	if err != nil {
		return err
	}
	if busy {
		return domain.Refuse(domain.KindConflict, "An email operation is running; retry shortly")
	}
	ep.Status = domain.EndpointPaused
	return s.Store.UpdateEndpoint(ctx, tx, ep)
}

// Control pauses, resumes or removes (disconnects) an endpoint.
func (s *Service) Control(ctx context.Context, a authz.Actor, endpointID, action string) (domain.EmailEndpointSummary, error) {
	var zero domain.EmailEndpointSummary
	if action != "pause" && action != "resume" && action != "remove" {
		return zero, domain.Refuse(domain.KindInvalid, "action must be pause, resume or remove")
	}
	ep, err := s.LoadForManager(ctx, a, endpointID)
	if err != nil {
		return zero, err
	}
	err = s.withWorkLease(ctx, ep, "An email operation is running; retry shortly", func() error {
		ep, err = s.Store.GetEndpoint(ctx, s.Store.DB, endpointID)
		if err != nil {
			return err
		}
		if ep.Status == domain.EndpointArchived {
			return domain.Refuse(domain.KindConflict, "This inbox is disconnected")
		}
		switch action {
		case "pause":
			err = s.Store.Tx(ctx, func(tx *sql.Tx) error {
				if err := s.stopEndpoint(ctx, tx, &ep); err != nil {
					return err
				}
				return s.Store.Audit(ctx, tx, a.AuditActor(), ep.CompanyID, "email_endpoint.pause", "email_endpoint", ep.ID, nil)
			})
		case "resume":
			err = s.resume(ctx, a, &ep)
		case "remove":
			err = s.remove(ctx, a, &ep)
		}
		return err
	})
	s.changed()
	if err != nil {
		return zero, err
	}
	return s.Summary(ctx, ep), nil
}

func (s *Service) resume(ctx context.Context, a authz.Actor, ep *domain.EmailEndpoint) error {
	if ep.ActivationAt == nil || ep.Address == "" {
		return domain.Refuse(domain.KindConflict, "Complete inbox setup before resuming")
	}
	key, err := s.resolveBound(ctx, s.Store.DB, TargetEndpoint, ep.ID, PathAPIKey)
	if errors.Is(err, errNoSecret) {
		return ErrCredentialUnavailable
	}
	if err != nil {
		return err
	}
	if _, err := s.keyed(key).GetInbox(ctx, ep.Address); err != nil {
		return providerError(err)
	}
	return s.Store.Tx(ctx, func(tx *sql.Tx) error {
		cur, err := s.Store.GetEndpoint(ctx, tx, ep.ID)
		if err != nil {
			return err
		}
		cur.Status = domain.EndpointActive
		cur.HealthMessage = "Connected"
		cur.LastSyncAt = nil
		if err := s.Store.UpdateEndpoint(ctx, tx, &cur); err != nil {
			return err
		}
		*ep = cur
		return s.Store.Audit(ctx, tx, a.AuditActor(), ep.CompanyID, "email_endpoint.resume", "email_endpoint", ep.ID, nil)
	})
}

// remove disconnects: it stops the endpoint, deletes only the webhook and
// runtime key Paperclip created, unbinds credentials (deleting secrets no
// one else uses) and archives the endpoint. The provider inbox and all task
// history are kept. A provider cleanup failure does not block the local
// disconnect; it is reported in last_error.
func (s *Service) remove(ctx context.Context, a authz.Actor, ep *domain.EmailEndpoint) error {
	if err := s.Store.Tx(ctx, func(tx *sql.Tx) error { return s.stopEndpoint(ctx, tx, ep) }); err != nil {
		return err
	}
	cleanupOK := s.cleanupProvider(ctx, *ep, ep.WebhookID, ep.OwnedAPIKeyID, "")
	return s.Store.Tx(ctx, func(tx *sql.Tx) error {
		cur, err := s.Store.GetEndpoint(ctx, tx, ep.ID)
		if err != nil {
			return err
		}
		if err := s.unbindAndCollect(ctx, tx, TargetEndpoint, ep.ID); err != nil {
			return err
		}
		now := s.Store.Now()
		cur.Status = domain.EndpointArchived
		cur.ArchivedAt = &now
		cur.HealthMessage = "Disconnected"
		cur.LastError = ""
		if !cleanupOK {
			cur.LastError = cleanupFailedMsg
		}
		if err := s.Store.UpdateEndpoint(ctx, tx, &cur); err != nil {
			return err
		}
		if s.Disconnected != nil {
			if err := s.Disconnected(ctx, tx, cur.ID); err != nil {
				return err
			}
		}
		*ep = cur
		return s.Store.Audit(ctx, tx, a.AuditActor(), ep.CompanyID, "email_endpoint.remove", "email_endpoint", ep.ID,
			map[string]any{"providerCleanup": cleanupOK})
	})
}

// cleanupProvider deletes the given Paperclip-owned webhook and runtime key
// with the endpoint's control key (or keyOverride), treating 404 as done.
func (s *Service) cleanupProvider(ctx context.Context, ep domain.EmailEndpoint, webhookID, keyID, keyOverride string) bool {
	if webhookID == "" && keyID == "" {
		return true
	}
	key := keyOverride
	if key == "" {
		var err error
		if key, err = s.resolveBound(ctx, s.Store.DB, TargetEndpoint, ep.ID, PathControlKey); err != nil {
			return false
		}
	}
	c := s.keyed(key)
	ok := true
	if webhookID != "" {
		if err := c.DeleteInboxWebhook(ctx, ep.Address, webhookID); err != nil && !errors.Is(err, agentmail.ErrNotFound) {
			s.Log.Warn("delete owned webhook", "endpoint", ep.ID, "err", err)
			ok = false
		}
	}
	if keyID != "" {
		if err := c.DeleteInboxAPIKey(ctx, ep.Address, keyID); err != nil && !errors.Is(err, agentmail.ErrNotFound) {
			s.Log.Warn("delete owned runtime key", "endpoint", ep.ID, "err", err)
			ok = false
		}
	}
	return ok
}

// ReconnectInput replaces an endpoint's key, its receiving mode, or both.
// At most one of APIKey and CredentialConnectionID is given; with neither,
// the endpoint keeps the key it was set up with (its saved credential, or
// the key given directly). An empty ReceiveMode keeps the current mode.
type ReconnectInput struct {
	APIKey                 string `json:"apiKey,omitempty"`
	CredentialConnectionID string `json:"credentialConnectionId,omitempty"`
	ReceiveMode            string `json:"receiveMode,omitempty"`
}

// validate checks a reconnect's input before anything is read: at most
// one key source, something to change, and well-formed values.
func (in ReconnectInput) validate() error {
	if in.APIKey != "" && in.CredentialConnectionID != "" {
		return domain.Refuse(domain.KindInvalid, "Give at most one of apiKey or credentialConnectionId")
	}
	if in.APIKey == "" && in.CredentialConnectionID == "" && in.ReceiveMode == "" {
		return domain.Refuse(domain.KindInvalid, "Give apiKey, credentialConnectionId or receiveMode: what should change")
	}
	if in.APIKey != "" {
		if err := checkAPIKey(in.APIKey); err != nil {
			return err
		}
	}
	if in.CredentialConnectionID != "" && !store.ValidID(in.CredentialConnectionID) {
		return domain.Refuse(domain.KindInvalid, "credentialConnectionId must be a UUID")
	}
	if in.ReceiveMode != "" && in.ReceiveMode != domain.ReceiveWebSocket && in.ReceiveMode != domain.ReceiveWebhook {
		return domain.Refuse(domain.KindInvalid, "receiveMode must be websocket or webhook")
	}
	return nil
}

// Reconnect replaces the credentials and/or receiving mode while keeping the
// inbox identity, its conversations and tasks (docs/email-setup.md, "7. Pause, resume, reconnect, disconnect"). When
// switching to webhook the new webhook is registered and saved before the
// live socket stops, so a refused registration leaves receiving untouched.
//
// The steps: choose the key (reconnectKey), check it reaches this inbox
// (verifyKey), then under the inbox's work lease replace the provider
// registrations (swapRegistrations) and run the setup again with the key.
func (s *Service) Reconnect(ctx context.Context, a authz.Actor, endpointID string, in ReconnectInput) (domain.EmailEndpointSummary, error) {
	var zero domain.EmailEndpointSummary
	if err := in.validate(); err != nil {
		return zero, err
	}
	ep, err := s.LoadForManager(ctx, a, endpointID)
	if err != nil {
		return zero, err
	}
	if ep.Status == domain.EndpointArchived || ep.Address == "" {
		return zero, domain.Refuse(domain.KindConflict, "Create a new inbox connection")
	}
	if in.ReceiveMode == "" {
		in.ReceiveMode = ep.ReceiveMode
	}
	key, setup, err := s.reconnectKey(ctx, a, ep, in)
	if err != nil {
		return zero, err
	}
	fresh, err := s.verifyKey(ctx, ep, key)
	if err != nil {
		return zero, err
	}
	ag, err := s.Store.GetAgent(ctx, s.Store.DB, ep.AssignedAgentID)
	if err != nil {
		return zero, err
	}
	err = s.withWorkLease(ctx, ep, "An email operation is running; retry shortly", func() error {
		ep, err := s.swapRegistrations(ctx, a, endpointID, fresh, in.ReceiveMode)
		if err != nil {
			return err
		}
		setup.ReceiveMode, setup.IdempotencyKey, setup.AssignedAgentID = in.ReceiveMode, ep.ID, ep.AssignedAgentID
		_, err = s.runSetup(ctx, a, ep.ID, ag, setup)
		return err
	})
	if err != nil {
		return zero, err
	}
	ep, err = s.Store.GetEndpoint(ctx, s.Store.DB, endpointID)
	if err != nil {
		return zero, err
	}
	return s.Summary(ctx, ep), nil
}

// reconnectKey chooses the key to reconnect with: the one given, the
// saved credential given, or the endpoint's own (its saved credential
// first, else the key it was set up with). A saved credential must still
// be the actor's to use. It returns the key and the key source the
// setup runs with (a saved credential by its id: the setup reads the key
// again there).
func (s *Service) reconnectKey(ctx context.Context, a authz.Actor, ep domain.EmailEndpoint, in ReconnectInput) (string, SetupInput, error) {
	if in.APIKey != "" {
		return in.APIKey, SetupInput{APIKey: in.APIKey}, nil
	}
	connID := in.CredentialConnectionID
	if connID == "" {
		connID = ep.CredentialConnectionID
	}
	if connID != "" {
		c, err := s.loadConnection(ctx, s.Store.DB, ep.CompanyID, connID)
		if err != nil {
			return "", SetupInput{}, err
		}
		key, err := s.credentialAccess(ctx, s.Store.DB, a, c)
		if err != nil {
			return "", SetupInput{}, err
		}
		return key, SetupInput{CredentialConnectionID: connID}, nil
	}
	key, err := s.resolveBound(ctx, s.Store.DB, TargetEndpoint, ep.ID, PathControlKey)
	if errors.Is(err, errNoSecret) {
		return "", SetupInput{}, domain.Refuse(domain.KindConflict, "This inbox has no saved key to reconnect with; give apiKey or credentialConnectionId")
	}
	if err != nil {
		return "", SetupInput{}, err
	}
	return key, SetupInput{APIKey: key}, nil
}

// verifyKey checks with the provider that key reaches the endpoint's
// inbox (an inbox-scoped key must be that inbox's) and returns a client
// using it.
func (s *Service) verifyKey(ctx context.Context, ep domain.EmailEndpoint, key string) (*agentmail.Client, error) {
	fresh := s.keyed(key)
	ident, err := fresh.InspectKey(ctx)
	if err != nil {
		return nil, providerError(err)
	}
	if ident.ScopeType == agentmail.ScopeInbox && !strings.EqualFold(ident.InboxID, ep.Address) {
		return nil, domain.Refuse(domain.KindForbidden, "API key belongs to a different inbox")
	}
	if _, err := fresh.GetInbox(ctx, ep.Address); err != nil {
		return nil, providerError(err)
	}
	return fresh, nil
}

// swapRegistrations replaces the endpoint's provider registrations, under
// its work lease: a webhook is registered with fresh first when switching
// to webhook receiving (so a refusal leaves receiving untouched), then the
// endpoint stops, the old webhook and runtime key are deleted at the
// provider (best effort) and their bindings dropped. It returns the
// stopped endpoint, ready for the setup to run again.
func (s *Service) swapRegistrations(ctx context.Context, a authz.Actor, endpointID string, fresh *agentmail.Client, mode string) (domain.EmailEndpoint, error) {
	ep, err := s.Store.GetEndpoint(ctx, s.Store.DB, endpointID)
	if err != nil {
		return ep, err
	}
	oldWebhook, oldKey := ep.WebhookID, ep.OwnedAPIKeyID
	oldControl, _ := s.resolveBound(ctx, s.Store.DB, TargetEndpoint, ep.ID, PathControlKey)
	newWebhook := ""
	if mode == domain.ReceiveWebhook && ep.WebhookID == "" {
		probe := ep
		if err := s.registerWebhook(ctx, fresh, &probe); err != nil {
			return ep, err
		}
		newWebhook = probe.WebhookID
	} else if mode == domain.ReceiveWebhook {
		newWebhook = ep.WebhookID
		oldWebhook = ""
	}
	err = s.Store.Tx(ctx, func(tx *sql.Tx) error {
		cur, err := s.Store.GetEndpoint(ctx, tx, ep.ID)
		if err != nil {
			return err
		}
		if err := s.stopEndpoint(ctx, tx, &cur); err != nil {
			return err
		}
		ep = cur
		return nil
	})
	if err != nil {
		return ep, err
	}
	s.changed()
	if !s.cleanupProvider(ctx, ep, oldWebhook, oldKey, oldControl) {
		s.Log.Warn("reconnect could not remove old provider registrations", "endpoint", ep.ID)
	}
	return s.dropRegistrations(ctx, a, ep.ID, newWebhook, mode)
}

// dropRegistrations unbinds the endpoint's old runtime key (and the
// webhook secret unless newWebhook keeps it), records newWebhook and
// audits the reconnect, in one transaction.
func (s *Service) dropRegistrations(ctx context.Context, a authz.Actor, endpointID, newWebhook, mode string) (domain.EmailEndpoint, error) {
	var ep domain.EmailEndpoint
	err := s.Store.Tx(ctx, func(tx *sql.Tx) error {
		cur, err := s.Store.GetEndpoint(ctx, tx, endpointID)
		if err != nil {
			return err
		}
		// The old runtime key goes; the webhook secret stays only with
		// the webhook it signs.
		keep := map[string]bool{}
		if newWebhook != "" {
			keep[PathWebhookSecret] = true
		}
		bs, err := s.Store.ListBindings(ctx, tx, TargetEndpoint, cur.ID)
		if err != nil {
			return err
		}
		for _, b := range bs {
			if keep[b.ConfigPath] || b.ConfigPath == PathControlKey {
				continue
			}
			if err := s.Store.DeleteBinding(ctx, tx, b.ID); err != nil {
				return err
			}
			if _, err := s.Vault.DeleteIfUnreferenced(ctx, tx, b.SecretID); err != nil {
				return err
			}
		}
		cur.WebhookID = newWebhook
		cur.OwnedAPIKeyID = ""
		cur.LastSyncAt = nil
		cur.CredentialConnectionID = ""
		if err := s.Store.UpdateEndpoint(ctx, tx, &cur); err != nil {
			return err
		}
		ep = cur
		return s.Store.Audit(ctx, tx, a.AuditActor(), ep.CompanyID, "email_endpoint.reconnect", "email_endpoint", ep.ID,
			map[string]any{"receiveMode": mode})
	})
	return ep, err
}

// ListInboxes returns the company's non-archived endpoints visible to the
// actor: board users with company access see all; an agent sees only the
// inboxes assigned to it that are active and authorized.
func (s *Service) ListInboxes(ctx context.Context, a authz.Actor, companyID string) ([]domain.EmailEndpointSummary, error) {
	if _, err := s.Authz.CompanyAccess(ctx, s.Store.DB, a, companyID, false); err != nil {
		return nil, err
	}
	eps, err := s.Store.ListEndpoints(ctx, s.Store.DB, companyID)
	if err != nil {
		return nil, err
	}
	visible := eps[:0]
	for _, ep := range eps {
		if a.Kind == authz.KindAgent {
			if ep.AssignedAgentID != a.AgentID() {
				continue
			}
			if _, _, err := s.ActiveEndpoint(ctx, s.Store.DB, ep.ID); err != nil {
				continue
			}
		}
		visible = append(visible, ep)
	}
	out := []domain.EmailEndpointSummary{}
	for _, sum := range s.Summaries(ctx, visible) {
		out = append(out, ForActor(a, sum))
	}
	return out, nil
}
