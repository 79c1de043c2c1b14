package email

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"

	"github.com/paperclipai/paperclipai/internal/authz"
	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/store"
)

// The operations behind the email connection and inbox routes, in the
// service's own terms: ids, an actor and inputs in, values or a
// *domain.Refusal out. The API edge (internal/api/email_routes.go) reads
// the request, calls these in the routes' order and renders the answer.

// checkID refuses an id that is not a UUID, naming its field.
func checkID(id, name string) error {
	if !store.ValidID(id) {
		return domain.Refuse(domain.KindInvalid, "invalid %s: must be a UUID", name)
	}
	return nil
}

// ManagedConnection is a saved credential opened by a connection manager
// with access to it (Manage): the connection, who opened it, and its key,
// which never leaves the package.
type ManagedConnection struct {
	Connection domain.EmailConnection
	actor      authz.Actor
	key        string
}

// Manage opens connection connectionID of company companyID for a: the
// ids must be UUIDs, a must manage the company's connections and have
// access to the credential. The checks run in this order, so a
// non-manager learns nothing about the connection id.
func (s *Service) Manage(ctx context.Context, a authz.Actor, companyID, connectionID string) (ManagedConnection, error) {
	if err := checkID(companyID, "companyId"); err != nil {
		return ManagedConnection{}, err
	}
	if err := s.requireManager(ctx, s.Store.DB, a, companyID, ""); err != nil {
		return ManagedConnection{}, err
	}
	if err := checkID(connectionID, "connectionId"); err != nil {
		return ManagedConnection{}, err
	}
	c, key, err := s.ConnectionKey(ctx, a, companyID, connectionID)
	if err != nil {
		return ManagedConnection{}, err
	}
	return ManagedConnection{Connection: c, actor: a, key: key}, nil
}

// ConnectionView returns the managed connection with its grants and
// installs.
func (s *Service) ConnectionView(ctx context.Context, m ManagedConnection) (domain.EmailConnection, error) {
	return s.presentConnection(ctx, s.Store.DB, m.Connection.ID)
}

// InspectConnection reports what the managed connection's key can reach.
func (s *Service) InspectConnection(ctx context.Context, m ManagedConnection) (InspectResult, error) {
	return s.Inspect(ctx, m.key)
}

// InspectKey validates a key given by a connection manager and reports
// what it can reach (POST …/email/inspect).
func (s *Service) InspectKey(ctx context.Context, key string) (InspectResult, error) {
	if err := checkAPIKey(key); err != nil {
		return InspectResult{}, err
	}
	return s.Inspect(ctx, key)
}

// CheckConnectionAddress validates username and domain (the shared
// domain when empty) and checks the address with the managed
// connection's key (CheckAddress).
func (s *Service) CheckConnectionAddress(ctx context.Context, m ManagedConnection, username, domainName string) (AddressCheck, error) {
	if username == "" || len(username) > 64 || !usernameRE.MatchString(username) {
		return AddressCheck{}, domain.Refuse(domain.KindInvalid, "username may contain letters, digits, dot, underscore and hyphen (at most 64)")
	}
	if domainName == "" {
		domainName = DefaultDomain
	}
	if err := checkDomain(domainName); err != nil {
		return AddressCheck{}, err
	}
	return s.CheckAddress(ctx, m.key, username, domainName)
}

// changeConnection runs change and its audit entry (action, details) on
// the managed connection in one transaction, as the actor who opened it.
func (s *Service) changeConnection(ctx context.Context, m ManagedConnection, action string, details map[string]any, change func(tx *sql.Tx) error) error {
	c := m.Connection
	return s.Store.Tx(ctx, func(tx *sql.Tx) error {
		if err := change(tx); err != nil {
			return err
		}
		return s.Store.Audit(ctx, tx, m.actor.AuditActor(), c.CompanyID, action, "email_connection", c.ID, details)
	})
}

// AddInstall gives an agent (targetType "agent", targetID its id) or every
// agent of the company (targetType "company") access to the managed
// connection, and returns the connection as it now is.
func (s *Service) AddInstall(ctx context.Context, m ManagedConnection, targetType, targetID string) (domain.EmailConnection, error) {
	c := m.Connection
	switch targetType {
	case "company":
		targetID = c.CompanyID
	case "agent":
		ag, err := s.Store.GetAgent(ctx, s.Store.DB, targetID)
		if err != nil && store.ValidID(targetID) && !errors.Is(err, store.ErrNotFound) {
			return domain.EmailConnection{}, fmt.Errorf("check agent: %w", err)
		}
		if !store.ValidID(targetID) || err != nil || ag.CompanyID != c.CompanyID || ag.Status == domain.AgentTerminated {
			return domain.EmailConnection{}, domain.Refuse(domain.KindInvalid, "Select an available company agent")
		}
	default:
		return domain.EmailConnection{}, domain.Refuse(domain.KindInvalid, "targetType must be company or agent")
	}
	inst := domain.EmailInstall{ConnectionID: c.ID, TargetType: targetType, TargetID: targetID}
	err := s.changeConnection(ctx, m, "email.connection.agents_updated", map[string]any{"added": targetType + ":" + targetID}, func(tx *sql.Tx) error {
		return s.Store.AddEmailInstall(ctx, tx, c.CompanyID, &inst)
	})
	if err != nil {
		return domain.EmailConnection{}, err
	}
	// Access may be back: inboxes that stopped for want of it start again.
	s.changed()
	return s.presentConnection(ctx, s.Store.DB, c.ID)
}

// RemoveInstall removes one agent access row of the managed connection.
func (s *Service) RemoveInstall(ctx context.Context, m ManagedConnection, installID string) error {
	return s.removeAccess(ctx, m, installID, "installId", "email.connection.agents_updated", "removedInstall", s.Store.DeleteEmailInstall)
}

// RevokeGrant revokes one human grant of the managed connection.
func (s *Service) RevokeGrant(ctx context.Context, m ManagedConnection, grantID string) error {
	return s.removeAccess(ctx, m, grantID, "grantId", "email.connection.grant_revoked", "grantId", s.Store.RevokeEmailGrant)
}

// removeAccess removes one access row (id, named name in a refusal) of
// the managed connection with remove, audited as action with the id under
// detail.
func (s *Service) removeAccess(ctx context.Context, m ManagedConnection, id, name, action, detail string,
	remove func(ctx context.Context, q db.Querier, connectionID, id string) error) error {
	if err := checkID(id, name); err != nil {
		return err
	}
	c := m.Connection
	err := s.changeConnection(ctx, m, action, map[string]any{detail: id}, func(tx *sql.Tx) error {
		return remove(ctx, tx, c.ID, id)
	})
	if err != nil {
		return err
	}
	// Access may be gone: inboxes that depended on it stop at once (the
	// workers cache the active inbox check per credential version).
	s.changed()
	return nil
}

// AddGrant grants the managed connection to the whole company (kind
// "organization") or to one member (kind "user"; userID empty is the
// actor who opened it, who is a connection manager, possibly without a
// membership row: the local board or an instance administrator).
func (s *Service) AddGrant(ctx context.Context, m ManagedConnection, kind, userID string) (domain.EmailGrant, error) {
	c := m.Connection
	g := domain.EmailGrant{ConnectionID: c.ID, Kind: kind}
	switch kind {
	case "organization":
	case "user":
		caller := m.actor.UserID
		if userID == "" {
			userID = caller
		}
		if !store.ValidID(userID) {
			return domain.EmailGrant{}, domain.Refuse(domain.KindInvalid, "userId must be a UUID")
		}
		if userID != caller {
			if _, err := s.Store.GetMembership(ctx, s.Store.DB, c.CompanyID, userID); err != nil {
				return domain.EmailGrant{}, domain.Refuse(domain.KindInvalid, "userId is not a member of this company")
			}
		}
		g.SubjectUserID = userID
	default:
		return domain.EmailGrant{}, domain.Refuse(domain.KindInvalid, "kind must be user or organization")
	}
	err := s.changeConnection(ctx, m, "email.connection.grant_added", map[string]any{"kind": g.Kind, "userId": g.SubjectUserID}, func(tx *sql.Tx) error {
		return s.Store.AddEmailGrant(ctx, tx, c.CompanyID, &g)
	})
	if err != nil {
		return domain.EmailGrant{}, err
	}
	// Access may be back: inboxes that stopped for want of it start again.
	s.changed()
	return g, nil
}

// Inbox returns inbox endpointID as a may see it (ReadableInbox's rules:
// anything else is the same 404).
func (s *Service) Inbox(ctx context.Context, a authz.Actor, endpointID string) (domain.EmailEndpointSummary, error) {
	ep, err := s.ReadableInbox(ctx, a, endpointID)
	if err != nil {
		return domain.EmailEndpointSummary{}, err
	}
	return ForActor(a, s.Summary(ctx, ep)), nil
}

// Route owners of other packages that still take the request. New routes
// go through the API edge instead; these two stay only until those owners
// move there, and know nothing of HTTP beyond net/http.

// ReadableEndpoint is ReadableInbox for the request's actor and its
// {endpointId} path value.
func (s *Service) ReadableEndpoint(r *http.Request) (domain.EmailEndpoint, error) {
	a, _ := authz.FromContext(r.Context())
	return s.ReadableInbox(r.Context(), a, r.PathValue("endpointId"))
}

// Gate serves h only while email connections are enabled (RequireEnabled,
// the experimental flag). Its plain function types let a route owner pass
// and get back an httpx.HandlerFunc without this package importing httpx.
func (s *Service) Gate(h func(http.ResponseWriter, *http.Request) error) func(http.ResponseWriter, *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error {
		if err := s.RequireEnabled(r.Context()); err != nil {
			return err
		}
		return h(w, r)
	}
}
