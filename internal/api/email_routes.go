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
// internal/email, which knows no HTTP. Each handler is built by jsonRoute
// or pageRoute (jsonroute.go) from an opener and one service call, so
// every route checks in the same order (path ids, then authority, then the
// body, then the service) and answers alike; the service's refusals become
// statuses in writeError.

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
	h("GET /api/companies/{companyId}/email/connections", e.listConnections())
	h("POST /api/companies/{companyId}/email/connections", e.createConnection())
	h("GET /api/companies/{companyId}/email/connections/{connectionId}", e.getConnection())
	h("POST /api/companies/{companyId}/email/connections/{connectionId}/inspect", e.inspectConnection())
	h("POST /api/companies/{companyId}/email/connections/{connectionId}/check-address", e.checkAddress())
	h("POST /api/companies/{companyId}/email/connections/{connectionId}/installs", e.addInstall())
	h("DELETE /api/companies/{companyId}/email/connections/{connectionId}/installs/{installId}", e.deleteInstall())
	h("POST /api/companies/{companyId}/email/connections/{connectionId}/grants", e.addGrant())
	h("DELETE /api/companies/{companyId}/email/connections/{connectionId}/grants/{grantId}", e.revokeGrant())
	h("GET /api/companies/{companyId}/email/inboxes", e.listInboxes())
	h("GET /api/companies/{companyId}/email/conversations", e.listCompanyConversations())
	h("POST /api/companies/{companyId}/email/inspect", e.inspectKey())
	h("POST /api/companies/{companyId}/email/inboxes", e.setup())
	h("GET /api/email/inboxes/{endpointId}", e.getInbox())
	h("POST /api/email/inboxes/{endpointId}/control", e.control())
	h("POST /api/email/inboxes/{endpointId}/reconnect", e.reconnect())
	h("GET /api/email/inboxes/{endpointId}/conversations", e.listConversations())
	h("GET /api/email/inboxes/{endpointId}/activity", e.inboxActivity())
	h("GET /api/email/inboxes/{endpointId}/sender-rules", e.getSenderRules())
	h("PUT /api/email/inboxes/{endpointId}/sender-rules", e.putSenderRules())
	h("POST /api/email/inboxes/{endpointId}/sender-rules/check-drift", e.checkDrift())
	h("POST /api/email/inboxes/{endpointId}/sender-rules/resolve-drift", e.resolveDrift())
	h("GET /api/companies/{companyId}/email/suppressions", e.listSuppressions())
	h("DELETE /api/companies/{companyId}/email/suppressions/{address}", e.liftSuppression())
}

// noStore marks an answer that carries credential-derived data as not
// cacheable.
func noStore(w http.ResponseWriter) { w.Header().Set("Cache-Control", "no-store") }

// The openers of the email routes (see opener): what each route's path
// names, checked in the order the routes have always checked it.

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

// readable loads the path inbox for an actor who may read it.
func (e emailRoutes) readable(r *http.Request) (domain.EmailEndpoint, error) {
	return e.svc.ReadableInbox(r.Context(), httpx.Actor(r), r.PathValue("endpointId"))
}

// writable loads the path inbox for an actor who may change its rules.
func (e emailRoutes) writable(r *http.Request) (domain.EmailEndpoint, error) {
	return e.svc.WritableInbox(r.Context(), httpx.Actor(r), r.PathValue("endpointId"))
}

// The request bodies of the routes that read a few fields.
type (
	addressBody struct {
		Username string `json:"username"`
		Domain   string `json:"domain"`
	}
	installBody struct {
		TargetType string `json:"targetType"`
		TargetID   string `json:"targetId"`
	}
	grantBody struct {
		Kind   string `json:"kind"`
		UserID string `json:"userId"`
	}
	keyBody struct {
		APIKey string `json:"apiKey"`
	}
	actionBody struct {
		Action string `json:"action"`
	}
)

// Connections (managers of the path company).

func (e emailRoutes) listConnections() httpx.HandlerFunc {
	page := pageRoute(e.managerCompany, func(r *http.Request, companyID string, p store.Page) ([]email.CredentialOption, *store.Cursor, error) {
		return e.svc.ListCredentials(r.Context(), httpx.Actor(r), companyID, p)
	})
	return func(w http.ResponseWriter, r *http.Request) error {
		noStore(w)
		return page(w, r)
	}
}

func (e emailRoutes) createConnection() httpx.HandlerFunc {
	return jsonRoute(e.s, e.managerCompany, answerCreatedPrivate, func(r *http.Request, companyID string, in email.ConnectInput) (domain.EmailConnection, error) {
		c, _, err := e.svc.Connect(r.Context(), httpx.Actor(r), companyID, in)
		return c, err
	})
}

func (e emailRoutes) getConnection() httpx.HandlerFunc {
	return jsonRoute(e.s, e.managed, answerOKPrivate, func(r *http.Request, m email.ManagedConnection, _ noBody) (domain.EmailConnection, error) {
		return e.svc.ConnectionView(r.Context(), m)
	})
}

func (e emailRoutes) inspectConnection() httpx.HandlerFunc {
	return jsonRoute(e.s, e.managed, answerOKPrivate, func(r *http.Request, m email.ManagedConnection, _ noBody) (email.InspectResult, error) {
		return e.svc.InspectConnection(r.Context(), m)
	})
}

func (e emailRoutes) checkAddress() httpx.HandlerFunc {
	return jsonRoute(e.s, e.managed, answerOKPrivate, func(r *http.Request, m email.ManagedConnection, in addressBody) (email.AddressCheck, error) {
		return e.svc.CheckConnectionAddress(r.Context(), m, in.Username, in.Domain)
	})
}

func (e emailRoutes) addInstall() httpx.HandlerFunc {
	return jsonRoute(e.s, e.managed, answerCreated, func(r *http.Request, m email.ManagedConnection, in installBody) (domain.EmailConnection, error) {
		return e.svc.AddInstall(r.Context(), m, in.TargetType, in.TargetID)
	})
}

func (e emailRoutes) deleteInstall() httpx.HandlerFunc {
	return jsonRoute(e.s, e.managed, answerNoContent, func(r *http.Request, m email.ManagedConnection, _ noBody) (noBody, error) {
		return noBody{}, e.svc.RemoveInstall(r.Context(), m, r.PathValue("installId"))
	})
}

func (e emailRoutes) addGrant() httpx.HandlerFunc {
	return jsonRoute(e.s, e.managed, answerCreated, func(r *http.Request, m email.ManagedConnection, in grantBody) (domain.EmailGrant, error) {
		return e.svc.AddGrant(r.Context(), m, in.Kind, in.UserID)
	})
}

func (e emailRoutes) revokeGrant() httpx.HandlerFunc {
	return jsonRoute(e.s, e.managed, answerNoContent, func(r *http.Request, m email.ManagedConnection, _ noBody) (noBody, error) {
		return noBody{}, e.svc.RevokeGrant(r.Context(), m, r.PathValue("grantId"))
	})
}

// inspectKey serves POST …/email/inspect: what a provider key can see,
// before anything is connected.
func (e emailRoutes) inspectKey() httpx.HandlerFunc {
	return jsonRoute(e.s, e.managerCompany, answerOKPrivate, func(r *http.Request, _ string, in keyBody) (email.InspectResult, error) {
		return e.svc.InspectKey(r.Context(), in.APIKey)
	})
}

// Inboxes.

// inboxList is the scope of GET …/email/inboxes.
type inboxList struct {
	companyID string
	archived  bool
}

// listInboxes serves GET /api/companies/{companyId}/email/inboxes
// (?includeArchived=, paged).
func (e emailRoutes) listInboxes() httpx.HandlerFunc {
	open := func(r *http.Request) (inboxList, error) {
		companyID, err := httpx.PathID(r, "companyId")
		if err != nil {
			return inboxList{}, err
		}
		switch v := r.URL.Query().Get("includeArchived"); {
		case v != "" && v != "true" && v != "false":
			return inboxList{}, httpx.Errorf(http.StatusBadRequest, "includeArchived must be true or false")
		case v == "true" && httpx.Actor(r).Kind != authz.KindAgent:
			// Disconnected inboxes are board history; agents keep seeing
			// only their active inboxes.
			return inboxList{companyID: companyID, archived: true}, nil
		}
		return inboxList{companyID: companyID}, nil
	}
	return pageRoute(open, func(r *http.Request, l inboxList, p store.Page) ([]domain.EmailEndpointSummary, *store.Cursor, error) {
		return e.svc.ListInboxesPage(r.Context(), httpx.Actor(r), l.companyID, l.archived, p)
	})
}

// listCompanyConversations serves GET /api/companies/{companyId}/email/conversations
// (?endpointId=, paged): the company's conversations across its inboxes,
// newest activity first, for board actors.
func (e emailRoutes) listCompanyConversations() httpx.HandlerFunc {
	return pageRoute(pathID("companyId"), func(r *http.Request, companyID string, p store.Page) ([]email.CompanyConversation, *store.Cursor, error) {
		return e.svc.CompanyConversations(r.Context(), httpx.Actor(r), companyID, r.URL.Query().Get("endpointId"), p)
	})
}

func (e emailRoutes) setup() httpx.HandlerFunc {
	return jsonRoute(e.s, e.managerCompany, answerCreated, func(r *http.Request, companyID string, in email.SetupInput) (domain.EmailEndpointSummary, error) {
		return e.svc.Setup(r.Context(), httpx.Actor(r), companyID, in)
	})
}

func (e emailRoutes) getInbox() httpx.HandlerFunc {
	return jsonRoute(e.s, pathValue("endpointId"), answerOK, func(r *http.Request, id string, _ noBody) (domain.EmailEndpointSummary, error) {
		return e.svc.Inbox(r.Context(), httpx.Actor(r), id)
	})
}

func (e emailRoutes) control() httpx.HandlerFunc {
	return jsonRoute(e.s, pathID("endpointId"), answerOK, func(r *http.Request, id string, in actionBody) (domain.EmailEndpointSummary, error) {
		return e.svc.Control(r.Context(), httpx.Actor(r), id, in.Action)
	})
}

func (e emailRoutes) reconnect() httpx.HandlerFunc {
	return jsonRoute(e.s, pathID("endpointId"), answerOK, func(r *http.Request, id string, in email.ReconnectInput) (domain.EmailEndpointSummary, error) {
		return e.svc.Reconnect(r.Context(), httpx.Actor(r), id, in)
	})
}

func (e emailRoutes) listConversations() httpx.HandlerFunc {
	return pageRoute(e.readable, func(r *http.Request, ep domain.EmailEndpoint, p store.Page) ([]email.ConversationSummary, *store.Cursor, error) {
		return e.svc.InboxConversations(r.Context(), ep, p)
	})
}

// inboxActivity serves GET …/activity: one page of the inbox's activity,
// the next page's cursor inside the object (not a header).
func (e emailRoutes) inboxActivity() httpx.HandlerFunc {
	return jsonRoute(e.s, e.readable, answerOK, func(r *http.Request, ep domain.EmailEndpoint, _ noBody) (email.InboxActivity, error) {
		p, err := httpx.PageParams(r)
		if err != nil {
			return email.InboxActivity{}, err
		}
		out, next, err := e.svc.InboxActivity(r.Context(), ep, p)
		if err == nil && next != nil {
			c := httpx.EncodeCursor(*next)
			out.NextCursor = &c
		}
		return out, err
	})
}

// Sender rules.

func (e emailRoutes) getSenderRules() httpx.HandlerFunc {
	return jsonRoute(e.s, e.readable, answerOKPrivate, func(r *http.Request, ep domain.EmailEndpoint, _ noBody) (email.SenderRulesView, error) {
		return e.svc.SenderRulesView(r.Context(), ep.ID)
	})
}

func (e emailRoutes) putSenderRules() httpx.HandlerFunc {
	return jsonRoute(e.s, e.writable, answerOK, func(r *http.Request, ep domain.EmailEndpoint, in domain.SenderRules) (email.SenderRulesView, error) {
		return e.svc.PutSenderRules(r.Context(), httpx.Actor(r), ep, in)
	})
}

func (e emailRoutes) checkDrift() httpx.HandlerFunc {
	return jsonRoute(e.s, e.writable, answerOK, func(r *http.Request, ep domain.EmailEndpoint, _ noBody) (email.SenderRulesView, error) {
		return e.svc.CheckDriftView(r.Context(), ep)
	})
}

func (e emailRoutes) resolveDrift() httpx.HandlerFunc {
	return jsonRoute(e.s, e.writable, answerOK, func(r *http.Request, ep domain.EmailEndpoint, in actionBody) (email.SenderRulesView, error) {
		return e.svc.ResolveDrift(r.Context(), httpx.Actor(r), ep, in.Action)
	})
}

// Suppressions.

// listSuppressions serves GET …/suppressions (paged): an object listing,
// the cursor inside the object.
func (e emailRoutes) listSuppressions() httpx.HandlerFunc {
	return jsonRoute(e.s, pathID("companyId"), answerOKPrivate, func(r *http.Request, companyID string, _ noBody) (email.SuppressionPage, error) {
		p, err := httpx.PageParams(r)
		if err != nil {
			return email.SuppressionPage{}, err
		}
		items, next, err := e.svc.ListSuppressions(r.Context(), httpx.Actor(r), companyID, p)
		if errors.Is(err, store.ErrBadCursor) {
			return email.SuppressionPage{}, httpx.ErrBadCursor
		}
		if err != nil {
			return email.SuppressionPage{}, err
		}
		// The conversion keeps email.SuppressionPage (what clients decode)
		// the shape of every object listing.
		return email.SuppressionPage(httpx.NewPageList(items, next)), nil
	})
}

// liftSuppression serves DELETE …/suppressions/{address}[?endpointId=].
func (e emailRoutes) liftSuppression() httpx.HandlerFunc {
	return jsonRoute(e.s, pathID("companyId"), answerOK, func(r *http.Request, companyID string, _ noBody) (email.Lifted, error) {
		return e.svc.LiftSuppression(r.Context(), httpx.Actor(r), companyID, r.PathValue("address"), r.URL.Query().Get("endpointId"))
	})
}
