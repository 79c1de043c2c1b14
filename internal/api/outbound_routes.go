package api

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/httpx"
	"github.com/paperclipai/paperclipai/internal/outbound"
	"github.com/paperclipai/paperclipai/internal/store"
)

// The send side's routes (docs/api.md, "Email"): the edge of
// internal/outbound, which knows no HTTP. Each handler reads the request,
// calls the service in the order the route has always checked things
// (path ids, then access, then the body), and renders the answer; the
// service's refusals become statuses in writeError.

// outboundRoutes are the handlers of the send side's routes.
type outboundRoutes struct {
	s   *Server
	svc *outbound.Service
}

// MountOutbound mounts the send, thread, delivery, review, resolve and
// send-policy routes of svc, each behind EmailGate; the routes of one send
// answer under …/email/deliveries/{publicationId} and under
// …/email/sends/{sendId} alike.
func (s *Server) MountOutbound(svc *outbound.Service) {
	o := outboundRoutes{s: s, svc: svc}
	gate := EmailGate(svc.Email)
	h := func(pattern string, fn httpx.HandlerFunc) { s.Handle(pattern, gate(fn)) }
	h("POST /api/companies/{companyId}/email/send", o.send)
	h("GET /api/companies/{companyId}/email/tasks/{issueId}", o.taskRef(o.idRoute("issueId", "Task ID must be a UUID", o.thread)))
	h("GET /api/companies/{companyId}/email/tasks/{issueId}/deliveries", o.taskRef(o.idRoute("issueId", "Task ID must be a UUID", o.deliveries)))
	h("GET /api/companies/{companyId}/email/deliveries/{publicationId}", o.idRoute("publicationId", "Publication ID must be a UUID", o.sendStatus))
	h("GET /api/companies/{companyId}/email/publications", o.list)
	h("GET /api/email/inboxes/{endpointId}/send-policy", o.getPolicy)
	h("PUT /api/email/inboxes/{endpointId}/send-policy", o.putPolicy)
	h("GET /api/companies/{companyId}/email/review-count", o.reviewCount)
	h("POST /api/companies/{companyId}/email/deliveries/{publicationId}/review", o.review("publicationId", "Publication ID must be a UUID"))
	h("POST /api/companies/{companyId}/email/deliveries/{publicationId}/resolve", o.idRoute("publicationId", "Publication ID must be a UUID", o.resolve))
	// The same routes under the name new clients use (docs/api.md,
	// "Email"): a send, by its sendId (the publicationId).
	h("GET /api/companies/{companyId}/email/sends", o.list)
	h("GET /api/companies/{companyId}/email/sends/{sendId}", o.idRoute("sendId", "Send ID must be a UUID", o.sendStatus))
	h("POST /api/companies/{companyId}/email/sends/{sendId}/review", o.review("sendId", "Send ID must be a UUID"))
	h("POST /api/companies/{companyId}/email/sends/{sendId}/resolve", o.idRoute("sendId", "Send ID must be a UUID", o.resolve))
}

// companyAccess validates the path company and checks the actor's access
// to it.
func (o outboundRoutes) companyAccess(r *http.Request, write bool) (string, error) {
	companyID, err := httpx.PathID(r, "companyId")
	if err != nil {
		return "", err
	}
	return companyID, o.svc.RequireCompanyAccess(r.Context(), httpx.Actor(r), companyID, write)
}

// idFunc answers a company route with one UUID path value.
type idFunc func(w http.ResponseWriter, r *http.Request, companyID, id string) (any, error)

// idRoute serves a company route with one UUID path value: read access to
// the company, a valid id (badID otherwise), then fn's result with 200.
func (o outboundRoutes) idRoute(param, badID string, fn idFunc) httpx.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		companyID, err := o.companyAccess(r, false)
		if err != nil {
			return err
		}
		id := r.PathValue(param)
		if !store.ValidID(id) {
			return httpx.Errorf(http.StatusBadRequest, "%s", badID)
		}
		out, err := fn(w, r, companyID, id)
		return httpx.Respond(w, http.StatusOK, out, err)
	}
}

// taskRef lets a company task route take the task's short identifier
// (ACME-12) wherever it takes the task's UUID: the identifier is looked up
// in the path's company, after the caller's access to that company is
// checked (so an outsider cannot probe which identifiers exist), and the
// path value is replaced by the UUID before next runs.
func (o outboundRoutes) taskRef(next httpx.HandlerFunc) httpx.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		v := r.PathValue("issueId")
		if !store.IssueIdentifierPattern.MatchString(v) {
			return next(w, r)
		}
		companyID, err := httpx.PathID(r, "companyId")
		if err != nil {
			return err
		}
		id, err := o.svc.TaskByIdentifier(r.Context(), httpx.Actor(r), companyID, v)
		if err != nil {
			return err
		}
		r.SetPathValue("issueId", id)
		return next(w, r)
	}
}

func (o outboundRoutes) send(w http.ResponseWriter, r *http.Request) error {
	companyID, err := o.companyAccess(r, true)
	if err != nil {
		return err
	}
	var req outbound.SendRequest
	if err := o.s.decodeJSON(w, r, &req); err != nil {
		return err
	}
	out, err := o.svc.Accept(r.Context(), httpx.Actor(r), companyID, req)
	return httpx.Respond(w, http.StatusAccepted, out, err)
}

func (o outboundRoutes) thread(_ http.ResponseWriter, r *http.Request, companyID, issueID string) (any, error) {
	return o.svc.Thread(r.Context(), httpx.Actor(r), companyID, issueID)
}

// deliveries serves GET …/email/tasks/{issueId}/deliveries: an array
// page, the next page in the Link and X-Next-Cursor headers.
func (o outboundRoutes) deliveries(w http.ResponseWriter, r *http.Request, companyID, issueID string) (any, error) {
	p, err := httpx.PageParams(r)
	if err != nil {
		return nil, err
	}
	out, next, err := o.svc.Deliveries(r.Context(), httpx.Actor(r), companyID, issueID, p)
	if err != nil {
		return nil, err
	}
	httpx.SetNextPage(w, r, next)
	return out, nil
}

func (o outboundRoutes) sendStatus(_ http.ResponseWriter, r *http.Request, companyID, id string) (any, error) {
	return o.svc.SendStatus(r.Context(), httpx.Actor(r), companyID, id)
}

func (o outboundRoutes) resolve(w http.ResponseWriter, r *http.Request, companyID, id string) (any, error) {
	var in outbound.ResolveInput
	if err := o.s.decodeJSON(w, r, &in); err != nil {
		return nil, err
	}
	return o.svc.Resolve(r.Context(), httpx.Actor(r), companyID, id, in)
}

// review serves a reviewer's decision on a held send whose id is the path
// value param. The reviewer's authority is checked by the service, after
// the body is read.
func (o outboundRoutes) review(param, badID string) httpx.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		companyID, err := httpx.PathID(r, "companyId")
		if err != nil {
			return err
		}
		id := r.PathValue(param)
		if !store.ValidID(id) {
			return httpx.Errorf(http.StatusBadRequest, "%s", badID)
		}
		var in outbound.ReviewInput
		if err := o.s.decodeJSON(w, r, &in); err != nil {
			return err
		}
		out, err := o.svc.Review(r.Context(), httpx.Actor(r), companyID, id, in)
		return httpx.Respond(w, http.StatusOK, out, err)
	}
}

func (o outboundRoutes) reviewCount(w http.ResponseWriter, r *http.Request) error {
	companyID, err := httpx.PathID(r, "companyId")
	if err != nil {
		return err
	}
	n, err := o.svc.AwaitingReviewCount(r.Context(), httpx.Actor(r), companyID)
	return httpx.Respond(w, http.StatusOK, map[string]int{"awaitingReview": n}, err)
}

// list serves a page of the company's sends (no-store).
func (o outboundRoutes) list(w http.ResponseWriter, r *http.Request) error {
	companyID, err := httpx.PathID(r, "companyId")
	if err != nil {
		return err
	}
	qv := r.URL.Query()
	q := outbound.ListQuery{Outcome: domain.SendOutcome(qv.Get("outcome")), Cursor: qv.Get("cursor")}
	if v := qv.Get("limit"); v != "" {
		if q.Limit, err = strconv.Atoi(v); err != nil || q.Limit == 0 {
			return httpx.Errorf(http.StatusBadRequest, "limit must be between 1 and %d", httpx.MaxPageLimit)
		}
	}
	out, err := o.svc.ListSends(r.Context(), httpx.Actor(r), companyID, q)
	if errors.Is(err, store.ErrBadCursor) {
		return httpx.ErrBadCursor
	}
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	httpx.WriteJSON(w, http.StatusOK, out)
	return nil
}

func (o outboundRoutes) getPolicy(w http.ResponseWriter, r *http.Request) error {
	ep, err := o.svc.PolicyInbox(r.Context(), httpx.Actor(r), r.PathValue("endpointId"))
	if err != nil {
		return err
	}
	p, err := o.svc.InboxSendPolicy(r.Context(), ep)
	return httpx.Respond(w, http.StatusOK, p, err)
}

func (o outboundRoutes) putPolicy(w http.ResponseWriter, r *http.Request) error {
	ep, err := o.svc.EditablePolicyInbox(r.Context(), httpx.Actor(r), r.PathValue("endpointId"))
	if err != nil {
		return err
	}
	var in outbound.SendPolicy
	if err := o.s.decodeJSON(w, r, &in); err != nil {
		return err
	}
	p, err := o.svc.PutSendPolicy(r.Context(), httpx.Actor(r), ep, in)
	return httpx.Respond(w, http.StatusOK, p, err)
}
