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
	"github.com/paperclipai/paperclipai/internal/httpx"
	"github.com/paperclipai/paperclipai/internal/store"
)

// Routes mounts the email connection and inbox routes, each behind the
// experimental-flag gate.
func (s *Service) Routes(rt httpx.Router) {
	h := func(pattern string, fn httpx.HandlerFunc) {
		rt.Handle(pattern, s.Gate(fn))
	}
	h("GET /api/companies/{companyId}/email/connections", s.listConnections)
	h("POST /api/companies/{companyId}/email/connections", s.createConnection)
	h("GET /api/companies/{companyId}/email/connections/{connectionId}", s.getConnection)
	h("POST /api/companies/{companyId}/email/connections/{connectionId}/inspect", s.inspectConnection)
	h("POST /api/companies/{companyId}/email/connections/{connectionId}/check-address", s.checkAddress)
	h("POST /api/companies/{companyId}/email/connections/{connectionId}/installs", s.addInstall)
	h("DELETE /api/companies/{companyId}/email/connections/{connectionId}/installs/{installId}", s.deleteInstall)
	h("POST /api/companies/{companyId}/email/connections/{connectionId}/grants", s.addGrant)
	h("DELETE /api/companies/{companyId}/email/connections/{connectionId}/grants/{grantId}", s.revokeGrant)
	h("GET /api/companies/{companyId}/email/inboxes", s.listInboxes)
	h("GET /api/companies/{companyId}/email/conversations", s.listCompanyConversations)
	h("POST /api/companies/{companyId}/email/inspect", s.inspectKey)
	h("POST /api/companies/{companyId}/email/inboxes", s.setup)
	h("GET /api/email/inboxes/{endpointId}", s.getInbox)
	h("POST /api/email/inboxes/{endpointId}/control", s.control)
	h("POST /api/email/inboxes/{endpointId}/reconnect", s.reconnect)
	h("GET /api/email/inboxes/{endpointId}/conversations", s.listConversations)
	h("GET /api/email/inboxes/{endpointId}/activity", s.inboxActivity)
	s.senderRulesRoutes(h)
}

// Gate serves h only while email connections are enabled (the
// experimental flag); routes of other packages use it too.
func (s *Service) Gate(h httpx.HandlerFunc) httpx.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if err := s.RequireEnabled(r.Context()); err != nil {
			return err
		}
		return h(w, r)
	}
}

// decodeJSON strictly decodes a request body within the configured limit.
func (s *Service) decodeJSON(w http.ResponseWriter, r *http.Request, v any) error {
	return httpx.DecodeJSON(w, r, s.Config.RequestBodyMaxBytes, v)
}

func noStore(w http.ResponseWriter) { w.Header().Set("Cache-Control", "no-store") }

func pathUUID(r *http.Request, name, msg string) (string, error) {
	v := r.PathValue(name)
	if !store.ValidID(v) {
		return "", httpx.Errorf(http.StatusBadRequest, "%s", msg)
	}
	return v, nil
}

// managerCompany validates the path company and requires a connection manager.
func (s *Service) managerCompany(r *http.Request) (string, error) {
	companyID, err := pathUUID(r, "companyId", "invalid companyId: must be a UUID")
	if err != nil {
		return "", err
	}
	return companyID, s.requireManager(r.Context(), s.Store.DB, httpx.Actor(r), companyID, "")
}

func (s *Service) listConnections(w http.ResponseWriter, r *http.Request) error {
	companyID, err := s.managerCompany(r)
	if err != nil {
		return err
	}
	out, err := s.ListCredentials(r.Context(), httpx.Actor(r), companyID)
	if err != nil {
		return err
	}
	noStore(w)
	httpx.WriteJSON(w, http.StatusOK, out)
	return nil
}

func (s *Service) createConnection(w http.ResponseWriter, r *http.Request) error {
	companyID, err := s.managerCompany(r)
	if err != nil {
		return err
	}
	var in ConnectInput
	if err := s.decodeJSON(w, r, &in); err != nil {
		return err
	}
	c, _, err := s.Connect(r.Context(), httpx.Actor(r), companyID, in)
	if err != nil {
		return err
	}
	noStore(w)
	httpx.WriteJSON(w, http.StatusCreated, c)
	return nil
}

// changeConnection runs change and its audit entry (action, details) on
// the connection c in one transaction, as the request's actor.
func (s *Service) changeConnection(r *http.Request, c domain.EmailConnection, action string, details map[string]any, change func(tx *sql.Tx) error) error {
	return s.Store.Tx(r.Context(), func(tx *sql.Tx) error {
		if err := change(tx); err != nil {
			return err
		}
		return s.Store.Audit(r.Context(), tx, httpx.Actor(r).AuditActor(), c.CompanyID, action, "email_connection", c.ID, details)
	})
}

// managedConnection loads the path connection for a manager with access.
func (s *Service) managedConnection(r *http.Request) (domain.EmailConnection, string, error) {
	companyID, err := s.managerCompany(r)
	if err != nil {
		return domain.EmailConnection{}, "", err
	}
	id, err := pathUUID(r, "connectionId", "invalid connectionId: must be a UUID")
	if err != nil {
		return domain.EmailConnection{}, "", err
	}
	return s.ConnectionKey(r.Context(), httpx.Actor(r), companyID, id)
}

func (s *Service) getConnection(w http.ResponseWriter, r *http.Request) error {
	c, _, err := s.managedConnection(r)
	if err != nil {
		return err
	}
	out, err := s.presentConnection(r.Context(), s.Store.DB, c.ID)
	if err != nil {
		return err
	}
	noStore(w)
	httpx.WriteJSON(w, http.StatusOK, out)
	return nil
}

func (s *Service) inspectConnection(w http.ResponseWriter, r *http.Request) error {
	_, key, err := s.managedConnection(r)
	if err != nil {
		return err
	}
	out, err := s.Inspect(r.Context(), key)
	if err != nil {
		return err
	}
	noStore(w)
	httpx.WriteJSON(w, http.StatusOK, out)
	return nil
}

func (s *Service) checkAddress(w http.ResponseWriter, r *http.Request) error {
	_, key, err := s.managedConnection(r)
	if err != nil {
		return err
	}
	var in struct {
		Username string `json:"username"`
		Domain   string `json:"domain"`
	}
	if err := s.decodeJSON(w, r, &in); err != nil {
		return err
	}
	if in.Username == "" || len(in.Username) > 64 || !usernameRE.MatchString(in.Username) {
		return httpx.Errorf(http.StatusBadRequest, "username may contain letters, digits, dot, underscore and hyphen (at most 64)")
	}
	if in.Domain == "" {
		in.Domain = DefaultDomain
	}
	if err := checkDomain(in.Domain); err != nil {
		return err
	}
	out, err := s.CheckAddress(r.Context(), key, in.Username, in.Domain)
	if err != nil {
		return err
	}
	noStore(w)
	httpx.WriteJSON(w, http.StatusOK, out)
	return nil
}

func (s *Service) addInstall(w http.ResponseWriter, r *http.Request) error {
	c, _, err := s.managedConnection(r)
	if err != nil {
		return err
	}
	var in struct {
		TargetType string `json:"targetType"`
		TargetID   string `json:"targetId"`
	}
	if err := s.decodeJSON(w, r, &in); err != nil {
		return err
	}
	switch in.TargetType {
	case "company":
		in.TargetID = c.CompanyID
	case "agent":
		ag, err := s.Store.GetAgent(r.Context(), s.Store.DB, in.TargetID)
		if err != nil && store.ValidID(in.TargetID) && !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("check agent: %w", err)
		}
		if !store.ValidID(in.TargetID) || err != nil || ag.CompanyID != c.CompanyID || ag.Status == domain.AgentTerminated {
			return httpx.Errorf(http.StatusBadRequest, "Select an available company agent")
		}
	default:
		return httpx.Errorf(http.StatusBadRequest, "targetType must be company or agent")
	}
	inst := domain.EmailInstall{ConnectionID: c.ID, TargetType: in.TargetType, TargetID: in.TargetID}
	err = s.changeConnection(r, c, "email.connection.agents_updated", map[string]any{"added": in.TargetType + ":" + in.TargetID}, func(tx *sql.Tx) error {
		return s.Store.AddEmailInstall(r.Context(), tx, c.CompanyID, &inst)
	})
	if err != nil {
		return err
	}
	// Access may be back: inboxes that stopped for want of it start again.
	s.changed()
	out, err := s.presentConnection(r.Context(), s.Store.DB, c.ID)
	return httpx.Respond(w, http.StatusCreated, out, err)
}

func (s *Service) deleteInstall(w http.ResponseWriter, r *http.Request) error {
	return s.removeAccess(w, r, "installId", "email.connection.agents_updated", "removedInstall", s.Store.DeleteEmailInstall)
}

// removeAccess removes one access row of the path's managed connection
// (its id in the path value param) with remove, audited as action with
// the id under detail, and answers 204.
func (s *Service) removeAccess(w http.ResponseWriter, r *http.Request, param, action, detail string,
	remove func(ctx context.Context, q db.Querier, connectionID, id string) error) error {
	c, _, err := s.managedConnection(r)
	if err != nil {
		return err
	}
	id, err := pathUUID(r, param, "invalid "+param+": must be a UUID")
	if err != nil {
		return err
	}
	err = s.changeConnection(r, c, action, map[string]any{detail: id}, func(tx *sql.Tx) error {
		return remove(r.Context(), tx, c.ID, id)
	})
	if err != nil {
		return err
	}
	// Access may be gone: inboxes that depended on it stop at once (the
	// workers cache the active inbox check per credential version).
	s.changed()
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Service) addGrant(w http.ResponseWriter, r *http.Request) error {
	c, _, err := s.managedConnection(r)
	if err != nil {
		return err
	}
	var in struct {
		Kind   string `json:"kind"`
		UserID string `json:"userId"`
	}
	if err := s.decodeJSON(w, r, &in); err != nil {
		return err
	}
	g := domain.EmailGrant{ConnectionID: c.ID, Kind: in.Kind}
	switch in.Kind {
	case "organization":
	case "user":
		// Without userId the grant is for the caller, who is a connection
		// manager of the company (possibly without a membership row: the
		// local board or an instance administrator).
		caller := httpx.Actor(r).UserID
		if in.UserID == "" {
			in.UserID = caller
		}
		if !store.ValidID(in.UserID) {
			return httpx.Errorf(http.StatusBadRequest, "userId must be a UUID")
		}
		if in.UserID != caller {
			if _, err := s.Store.GetMembership(r.Context(), s.Store.DB, c.CompanyID, in.UserID); err != nil {
				return httpx.Errorf(http.StatusBadRequest, "userId is not a member of this company")
			}
		}
		g.SubjectUserID = in.UserID
	default:
		return httpx.Errorf(http.StatusBadRequest, "kind must be user or organization")
	}
	err = s.changeConnection(r, c, "email.connection.grant_added", map[string]any{"kind": g.Kind, "userId": g.SubjectUserID}, func(tx *sql.Tx) error {
		return s.Store.AddEmailGrant(r.Context(), tx, c.CompanyID, &g)
	})
	if err != nil {
		return err
	}
	// Access may be back: inboxes that stopped for want of it start again.
	s.changed()
	httpx.WriteJSON(w, http.StatusCreated, g)
	return nil
}

func (s *Service) revokeGrant(w http.ResponseWriter, r *http.Request) error {
	return s.removeAccess(w, r, "grantId", "email.connection.grant_revoked", "grantId", s.Store.RevokeEmailGrant)
}

func (s *Service) listInboxes(w http.ResponseWriter, r *http.Request) error {
	companyID, err := pathUUID(r, "companyId", "invalid companyId: must be a UUID")
	if err != nil {
		return err
	}
	a := httpx.Actor(r)
	archived := false
	switch v := r.URL.Query().Get("includeArchived"); {
	case v != "" && v != "true" && v != "false":
		return httpx.Errorf(http.StatusBadRequest, "includeArchived must be true or false")
	case v == "true" && a.Kind != authz.KindAgent:
		// Disconnected inboxes are board history; agents keep seeing only
		// their active inboxes.
		archived = true
	}
	p, err := httpx.PageParams(r)
	if err != nil {
		return err
	}
	out, next, err := s.ListInboxesPage(r.Context(), a, companyID, archived, p)
	if err != nil {
		return err
	}
	httpx.WritePage(w, r, out, next)
	return nil
}

func (s *Service) inspectKey(w http.ResponseWriter, r *http.Request) error {
	if _, err := s.managerCompany(r); err != nil {
		return err
	}
	var in struct {
		APIKey string `json:"apiKey"`
	}
	if err := s.decodeJSON(w, r, &in); err != nil {
		return err
	}
	if err := checkAPIKey(in.APIKey); err != nil {
		return err
	}
	out, err := s.Inspect(r.Context(), in.APIKey)
	if err != nil {
		return err
	}
	noStore(w)
	httpx.WriteJSON(w, http.StatusOK, out)
	return nil
}

func (s *Service) setup(w http.ResponseWriter, r *http.Request) error {
	companyID, err := s.managerCompany(r)
	if err != nil {
		return err
	}
	var in SetupInput
	if err := s.decodeJSON(w, r, &in); err != nil {
		return err
	}
	out, err := s.Setup(r.Context(), httpx.Actor(r), companyID, in)
	return httpx.Respond(w, http.StatusCreated, out, err)
}

func (s *Service) getInbox(w http.ResponseWriter, r *http.Request) error {
	id, err := pathUUID(r, "endpointId", "invalid endpointId: must be a UUID")
	if err != nil {
		return err
	}
	ep, err := s.Store.GetEndpoint(r.Context(), s.Store.DB, id)
	if err != nil {
		return httpx.Errorf(http.StatusNotFound, "Email inbox not found")
	}
	a := httpx.Actor(r)
	if _, err := s.Authz.CompanyAccess(r.Context(), s.Store.DB, a, ep.CompanyID, false); err != nil {
		return httpx.Errorf(http.StatusNotFound, "Email inbox not found")
	}
	if a.Kind == authz.KindAgent && ep.AssignedAgentID != a.AgentID() {
		return httpx.Errorf(http.StatusNotFound, "Email inbox not found")
	}
	httpx.WriteJSON(w, http.StatusOK, ForActor(a, s.Summary(r.Context(), ep)))
	return nil
}

func (s *Service) control(w http.ResponseWriter, r *http.Request) error {
	id, err := pathUUID(r, "endpointId", "invalid endpointId: must be a UUID")
	if err != nil {
		return err
	}
	var in struct {
		Action string `json:"action"`
	}
	if err := s.decodeJSON(w, r, &in); err != nil {
		return err
	}
	out, err := s.Control(r.Context(), httpx.Actor(r), id, in.Action)
	return httpx.Respond(w, http.StatusOK, out, err)
}

func (s *Service) reconnect(w http.ResponseWriter, r *http.Request) error {
	id, err := pathUUID(r, "endpointId", "invalid endpointId: must be a UUID")
	if err != nil {
		return err
	}
	var in ReconnectInput
	if err := s.decodeJSON(w, r, &in); err != nil {
		return err
	}
	out, err := s.Reconnect(r.Context(), httpx.Actor(r), id, in)
	return httpx.Respond(w, http.StatusOK, out, err)
}
