package api

import (
	"errors"
	"net/http"

	"github.com/paperclipai/paperclipai/internal/authz"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/email"
	"github.com/paperclipai/paperclipai/internal/httpx"
	"github.com/paperclipai/paperclipai/internal/store"
)

// The email channel's routes (docs/api.md, "Email"): the edge of
// internal/email, which knows no HTTP. Each handler reads the request,
// calls the service in the order the route has always checked things
// (path ids, then authority, then the body), and renders the answer; the
// service's refusals become statuses in writeError.

// emailRoutes are the handlers of the email service's routes.
type emailRoutes struct {
	s   *Server
	svc *email.Service
}

// EmailGate serves a route only while email connections are enabled (the
// experimental flag, email.Service.RequireEnabled): the gate of every
// email route, for route owners of other packages too.
func EmailGate(svc *email.Service) func(httpx.HandlerFunc) httpx.HandlerFunc {
	return func(h httpx.HandlerFunc) httpx.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) error {
			if err := svc.RequireEnabled(r.Context()); err != nil {
				return err
			}
			return h(w, r)
		}
	}
}

// MountEmail mounts the email connection, inbox, sender rule and
// suppression routes of svc, each behind EmailGate.
func (s *Server) MountEmail(svc *email.Service) {
	e := emailRoutes{s: s, svc: svc}
	gate := EmailGate(svc)
	h := func(pattern string, fn httpx.HandlerFunc) { s.Handle(pattern, gate(fn)) }
	h("GET /api/companies/{companyId}/email/connections", e.listConnections)
	h("POST /api/companies/{companyId}/email/connections", e.createConnection)
	h("GET /api/companies/{companyId}/email/connections/{connectionId}", e.getConnection)
	h("POST /api/companies/{companyId}/email/connections/{connectionId}/inspect", e.inspectConnection)
	h("POST /api/companies/{companyId}/email/connections/{connectionId}/check-address", e.checkAddress)
	h("POST /api/companies/{companyId}/email/connections/{connectionId}/installs", e.addInstall)
	h("DELETE /api/companies/{companyId}/email/connections/{connectionId}/installs/{installId}", e.deleteInstall)
	h("POST /api/companies/{companyId}/email/connections/{connectionId}/grants", e.addGrant)
	h("DELETE /api/companies/{companyId}/email/connections/{connectionId}/grants/{grantId}", e.revokeGrant)
	h("GET /api/companies/{companyId}/email/inboxes", e.listInboxes)
	h("GET /api/companies/{companyId}/email/conversations", e.listCompanyConversations)
	h("POST /api/companies/{companyId}/email/inspect", e.inspectKey)
	h("POST /api/companies/{companyId}/email/inboxes", e.setup)
	h("GET /api/email/inboxes/{endpointId}", e.getInbox)
	h("POST /api/email/inboxes/{endpointId}/control", e.control)
	h("POST /api/email/inboxes/{endpointId}/reconnect", e.reconnect)
	h("GET /api/email/inboxes/{endpointId}/conversations", e.listConversations)
	h("GET /api/email/inboxes/{endpointId}/activity", e.inboxActivity)
	h("GET /api/email/inboxes/{endpointId}/sender-rules", e.getSenderRules)
	h("PUT /api/email/inboxes/{endpointId}/sender-rules", e.putSenderRules)
	h("POST /api/email/inboxes/{endpointId}/sender-rules/check-drift", e.checkDrift)
	h("POST /api/email/inboxes/{endpointId}/sender-rules/resolve-drift", e.resolveDrift)
	h("GET /api/companies/{companyId}/email/suppressions", e.listSuppressions)
	h("DELETE /api/companies/{companyId}/email/suppressions/{address}", e.liftSuppression)
}

// noStore marks an answer that carries credential-derived data as not
// cacheable.
func noStore(w http.ResponseWriter) { w.Header().Set("Cache-Control", "no-store") }

// managerCompany validates the path company and requires a connection
// manager of it.
func (e emailRoutes) managerCompany(r *http.Request) (string, error) {
	companyID, err := httpx.PathID(r, "companyId")
	if err != nil {
		return "", err
	}
	return companyID, e.svc.RequireConnectionManager(r.Context(), httpx.Actor(r), companyID)
}

// managed opens the path connection for a manager with access.
func (e emailRoutes) managed(r *http.Request) (email.ManagedConnection, error) {
	return e.svc.Manage(r.Context(), httpx.Actor(r), r.PathValue("companyId"), r.PathValue("connectionId"))
}

func (e emailRoutes) listConnections(w http.ResponseWriter, r *http.Request) error {
	companyID, err := e.managerCompany(r)
	if err != nil {
		return err
	}
	p, err := httpx.PageParams(r)
	if err != nil {
		return err
	}
	out, next, err := e.svc.ListCredentials(r.Context(), httpx.Actor(r), companyID, p)
	if err != nil {
		return err
	}
	noStore(w)
	httpx.WritePage(w, r, out, next)
	return nil
}

func (e emailRoutes) createConnection(w http.ResponseWriter, r *http.Request) error {
	companyID, err := e.managerCompany(r)
	if err != nil {
		return err
	}
	var in email.ConnectInput
	if err := e.s.decodeJSON(w, r, &in); err != nil {
		return err
	}
	c, _, err := e.svc.Connect(r.Context(), httpx.Actor(r), companyID, in)
	if err != nil {
		return err
	}
	noStore(w)
	httpx.WriteJSON(w, http.StatusCreated, c)
	return nil
}

func (e emailRoutes) getConnection(w http.ResponseWriter, r *http.Request) error {
	m, err := e.managed(r)
	if err != nil {
		return err
	}
	out, err := e.svc.ConnectionView(r.Context(), m)
	if err != nil {
		return err
	}
	noStore(w)
	httpx.WriteJSON(w, http.StatusOK, out)
	return nil
}

func (e emailRoutes) inspectConnection(w http.ResponseWriter, r *http.Request) error {
	m, err := e.managed(r)
	if err != nil {
		return err
	}
	out, err := e.svc.InspectConnection(r.Context(), m)
	if err != nil {
		return err
	}
	noStore(w)
	httpx.WriteJSON(w, http.StatusOK, out)
	return nil
}

func (e emailRoutes) checkAddress(w http.ResponseWriter, r *http.Request) error {
	m, err := e.managed(r)
	if err != nil {
		return err
	}
	var in struct {
		Username string `json:"username"`
		Domain   string `json:"domain"`
	}
	if err := e.s.decodeJSON(w, r, &in); err != nil {
		return err
	}
	out, err := e.svc.CheckConnectionAddress(r.Context(), m, in.Username, in.Domain)
	if err != nil {
		return err
	}
	noStore(w)
	httpx.WriteJSON(w, http.StatusOK, out)
	return nil
}

func (e emailRoutes) addInstall(w http.ResponseWriter, r *http.Request) error {
	m, err := e.managed(r)
	if err != nil {
		return err
	}
	var in struct {
		TargetType string `json:"targetType"`
		TargetID   string `json:"targetId"`
	}
	if err := e.s.decodeJSON(w, r, &in); err != nil {
		return err
	}
	out, err := e.svc.AddInstall(r.Context(), m, in.TargetType, in.TargetID)
	return httpx.Respond(w, http.StatusCreated, out, err)
}

func (e emailRoutes) deleteInstall(w http.ResponseWriter, r *http.Request) error {
	m, err := e.managed(r)
	if err != nil {
		return err
	}
	if err := e.svc.RemoveInstall(r.Context(), m, r.PathValue("installId")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (e emailRoutes) addGrant(w http.ResponseWriter, r *http.Request) error {
	m, err := e.managed(r)
	if err != nil {
		return err
	}
	var in struct {
		Kind   string `json:"kind"`
		UserID string `json:"userId"`
	}
	if err := e.s.decodeJSON(w, r, &in); err != nil {
		return err
	}
	g, err := e.svc.AddGrant(r.Context(), m, in.Kind, in.UserID)
	return httpx.Respond(w, http.StatusCreated, g, err)
}

func (e emailRoutes) revokeGrant(w http.ResponseWriter, r *http.Request) error {
	m, err := e.managed(r)
	if err != nil {
		return err
	}
	if err := e.svc.RevokeGrant(r.Context(), m, r.PathValue("grantId")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (e emailRoutes) listInboxes(w http.ResponseWriter, r *http.Request) error {
	companyID, err := httpx.PathID(r, "companyId")
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
	out, next, err := e.svc.ListInboxesPage(r.Context(), a, companyID, archived, p)
	if err != nil {
		return err
	}
	httpx.WritePage(w, r, out, next)
	return nil
}

// listCompanyConversations serves GET /api/companies/{companyId}/email/conversations
// (?endpointId=, paged): the company's conversations across its inboxes,
// newest activity first, for board actors.
func (e emailRoutes) listCompanyConversations(w http.ResponseWriter, r *http.Request) error {
	companyID, err := httpx.PathID(r, "companyId")
	if err != nil {
		return err
	}
	p, err := httpx.PageParams(r)
	if err != nil {
		return err
	}
	out, next, err := e.svc.CompanyConversations(r.Context(), httpx.Actor(r), companyID, r.URL.Query().Get("endpointId"), p)
	if err != nil {
		return err
	}
	httpx.WritePage(w, r, out, next)
	return nil
}

func (e emailRoutes) inspectKey(w http.ResponseWriter, r *http.Request) error {
	if _, err := e.managerCompany(r); err != nil {
		return err
	}
	var in struct {
		APIKey string `json:"apiKey"`
	}
	if err := e.s.decodeJSON(w, r, &in); err != nil {
		return err
	}
	out, err := e.svc.InspectKey(r.Context(), in.APIKey)
	if err != nil {
		return err
	}
	noStore(w)
	httpx.WriteJSON(w, http.StatusOK, out)
	return nil
}

func (e emailRoutes) setup(w http.ResponseWriter, r *http.Request) error {
	companyID, err := e.managerCompany(r)
	if err != nil {
		return err
	}
	var in email.SetupInput
	if err := e.s.decodeJSON(w, r, &in); err != nil {
		return err
	}
	out, err := e.svc.Setup(r.Context(), httpx.Actor(r), companyID, in)
	return httpx.Respond(w, http.StatusCreated, out, err)
}

func (e emailRoutes) getInbox(w http.ResponseWriter, r *http.Request) error {
	out, err := e.svc.Inbox(r.Context(), httpx.Actor(r), r.PathValue("endpointId"))
	return httpx.Respond(w, http.StatusOK, out, err)
}

func (e emailRoutes) control(w http.ResponseWriter, r *http.Request) error {
	id, err := httpx.PathID(r, "endpointId")
	if err != nil {
		return err
	}
	var in struct {
		Action string `json:"action"`
	}
	if err := e.s.decodeJSON(w, r, &in); err != nil {
		return err
	}
	out, err := e.svc.Control(r.Context(), httpx.Actor(r), id, in.Action)
	return httpx.Respond(w, http.StatusOK, out, err)
}

func (e emailRoutes) reconnect(w http.ResponseWriter, r *http.Request) error {
	id, err := httpx.PathID(r, "endpointId")
	if err != nil {
		return err
	}
	var in email.ReconnectInput
	if err := e.s.decodeJSON(w, r, &in); err != nil {
		return err
	}
	out, err := e.svc.Reconnect(r.Context(), httpx.Actor(r), id, in)
	return httpx.Respond(w, http.StatusOK, out, err)
}

// readable loads the path inbox for an actor who may read it.
func (e emailRoutes) readable(r *http.Request) (domain.EmailEndpoint, error) {
	return e.svc.ReadableInbox(r.Context(), httpx.Actor(r), r.PathValue("endpointId"))
}

// writable loads the path inbox for an actor who may change its rules.
func (e emailRoutes) writable(r *http.Request) (domain.EmailEndpoint, error) {
	return e.svc.WritableInbox(r.Context(), httpx.Actor(r), r.PathValue("endpointId"))
}

func (e emailRoutes) listConversations(w http.ResponseWriter, r *http.Request) error {
	ep, err := e.readable(r)
	if err != nil {
		return err
	}
	p, err := httpx.PageParams(r)
	if err != nil {
		return err
	}
	out, next, err := e.svc.InboxConversations(r.Context(), ep, p)
	if err != nil {
		return err
	}
	httpx.WritePage(w, r, out, next)
	return nil
}

func (e emailRoutes) inboxActivity(w http.ResponseWriter, r *http.Request) error {
	ep, err := e.readable(r)
	if err != nil {
		return err
	}
	p, err := httpx.PageParams(r)
	if err != nil {
		return err
	}
	out, next, err := e.svc.InboxActivity(r.Context(), ep, p)
	if err != nil {
		return err
	}
	if next != nil {
		c := httpx.EncodeCursor(*next)
		out.NextCursor = &c
	}
	httpx.WriteJSON(w, http.StatusOK, out)
	return nil
}

func (e emailRoutes) getSenderRules(w http.ResponseWriter, r *http.Request) error {
	ep, err := e.readable(r)
	if err != nil {
		return err
	}
	v, err := e.svc.SenderRulesView(r.Context(), ep.ID)
	if err != nil {
		return err
	}
	noStore(w)
	httpx.WriteJSON(w, http.StatusOK, v)
	return nil
}

func (e emailRoutes) putSenderRules(w http.ResponseWriter, r *http.Request) error {
	ep, err := e.writable(r)
	if err != nil {
		return err
	}
	var in domain.SenderRules
	if err := e.s.decodeJSON(w, r, &in); err != nil {
		return err
	}
	v, err := e.svc.PutSenderRules(r.Context(), httpx.Actor(r), ep, in)
	return httpx.Respond(w, http.StatusOK, v, err)
}

func (e emailRoutes) checkDrift(w http.ResponseWriter, r *http.Request) error {
	ep, err := e.writable(r)
	if err != nil {
		return err
	}
	v, err := e.svc.CheckDriftView(r.Context(), ep)
	return httpx.Respond(w, http.StatusOK, v, err)
}

func (e emailRoutes) resolveDrift(w http.ResponseWriter, r *http.Request) error {
	ep, err := e.writable(r)
	if err != nil {
		return err
	}
	var in struct {
		Action string `json:"action"`
	}
	if err := e.s.decodeJSON(w, r, &in); err != nil {
		return err
	}
	v, err := e.svc.ResolveDrift(r.Context(), httpx.Actor(r), ep, in.Action)
	return httpx.Respond(w, http.StatusOK, v, err)
}

func (e emailRoutes) listSuppressions(w http.ResponseWriter, r *http.Request) error {
	companyID, err := httpx.PathID(r, "companyId")
	if err != nil {
		return err
	}
	p, err := httpx.PageParams(r)
	if err != nil {
		return err
	}
	items, next, err := e.svc.ListSuppressions(r.Context(), httpx.Actor(r), companyID, p)
	if errors.Is(err, store.ErrBadCursor) {
		return httpx.ErrBadCursor
	}
	if err != nil {
		return err
	}
	noStore(w)
	// The conversion keeps email.SuppressionPage (what clients decode)
	// the shape of every object listing.
	httpx.WriteJSON(w, http.StatusOK, email.SuppressionPage(httpx.NewPageList(items, next)))
	return nil
}

// liftSuppression serves DELETE …/suppressions/{address}[?endpointId=].
func (e emailRoutes) liftSuppression(w http.ResponseWriter, r *http.Request) error {
	companyID, err := httpx.PathID(r, "companyId")
	if err != nil {
		return err
	}
	out, err := e.svc.LiftSuppression(r.Context(), httpx.Actor(r), companyID, r.PathValue("address"), r.URL.Query().Get("endpointId"))
	return httpx.Respond(w, http.StatusOK, out, err)
}
