package outbound

import (
	"net/http"

	"github.com/paperclipai/paperclipai/internal/httpx"
	"github.com/paperclipai/paperclipai/internal/store"
)

// Routes mounts the send, thread, delivery and resolve routes, behind the
// email channel's experimental-flag gate.
func (s *Service) Routes(rt httpx.Router) {
	h := func(pattern string, fn httpx.HandlerFunc) { rt.Handle(pattern, s.Email.Gate(fn)) }
	h("POST /api/companies/{companyId}/email/send", func(w http.ResponseWriter, r *http.Request) error {
		companyID, err := s.companyAccess(r, true)
		if err != nil {
			return err
		}
		var req SendRequest
		if err := httpx.DecodeJSON(w, r, s.RequestBodyMaxBytes, &req); err != nil {
			return err
		}
		out, err := s.Accept(r.Context(), httpx.Actor(r), companyID, req)
		if err != nil {
			return err
		}
		httpx.WriteJSON(w, http.StatusAccepted, out)
		return nil
	})
	// idRoute serves a company route with one UUID path value: read access to
	// the company, a valid id, then fn's result with status.
	idRoute := func(param, badID string, status int, fn func(w http.ResponseWriter, r *http.Request, companyID, id string) (any, error)) httpx.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) error {
			companyID, err := s.companyAccess(r, false)
			if err != nil {
				return err
			}
			id := r.PathValue(param)
			if !store.ValidID(id) {
				return httpx.Errorf(http.StatusBadRequest, "%s", badID)
			}
			out, err := fn(w, r, companyID, id)
			if err != nil {
				return err
			}
			httpx.WriteJSON(w, status, out)
			return nil
		}
	}
	h("GET /api/companies/{companyId}/email/tasks/{issueId}", s.taskRef(idRoute("issueId", "Task ID must be a UUID", http.StatusOK,
		func(_ http.ResponseWriter, r *http.Request, companyID, id string) (any, error) {
			return s.Thread(r.Context(), httpx.Actor(r), companyID, id)
		})))
	h("GET /api/companies/{companyId}/email/tasks/{issueId}/deliveries", s.taskRef(idRoute("issueId", "Task ID must be a UUID", http.StatusOK, s.deliveriesRoute)))
	h("GET /api/companies/{companyId}/email/deliveries/{publicationId}", idRoute("publicationId", "Publication ID must be a UUID", http.StatusOK,
		func(_ http.ResponseWriter, r *http.Request, companyID, id string) (any, error) {
			return s.SendStatus(r.Context(), httpx.Actor(r), companyID, id)
		}))
	h("GET /api/companies/{companyId}/email/publications", s.listRoute)
	h("GET /api/email/inboxes/{endpointId}/send-policy", s.getPolicyRoute)
	h("PUT /api/email/inboxes/{endpointId}/send-policy", s.putPolicyRoute)
	h("GET /api/companies/{companyId}/email/review-count", func(w http.ResponseWriter, r *http.Request) error {
		companyID, err := httpx.PathID(r, "companyId")
		if err != nil {
			return err
		}
		if err := s.reviewAccess(r.Context(), httpx.Actor(r), companyID); err != nil {
			return err
		}
		n, err := s.Store.CountCompanyHeldSends(r.Context(), s.Store.DB, companyID)
		if err != nil {
			return err
		}
		httpx.WriteJSON(w, http.StatusOK, map[string]int{"awaitingReview": n})
		return nil
	})
	h("POST /api/companies/{companyId}/email/deliveries/{publicationId}/review", func(w http.ResponseWriter, r *http.Request) error {
		companyID, err := httpx.PathID(r, "companyId")
		if err != nil {
			return err
		}
		id := r.PathValue("publicationId")
		if !store.ValidID(id) {
			return httpx.Errorf(http.StatusBadRequest, "Publication ID must be a UUID")
		}
		var in ReviewInput
		if err := httpx.DecodeJSON(w, r, s.RequestBodyMaxBytes, &in); err != nil {
			return err
		}
		out, err := s.Review(r.Context(), httpx.Actor(r), companyID, id, in)
		if err != nil {
			return err
		}
		httpx.WriteJSON(w, http.StatusOK, out)
		return nil
	})
	h("POST /api/companies/{companyId}/email/deliveries/{publicationId}/resolve", idRoute("publicationId", "Publication ID must be a UUID", http.StatusOK,
		func(w http.ResponseWriter, r *http.Request, companyID, id string) (any, error) {
			var in ResolveInput
			if err := httpx.DecodeJSON(w, r, s.RequestBodyMaxBytes, &in); err != nil {
				return nil, err
			}
			return s.Resolve(r.Context(), httpx.Actor(r), companyID, id, in)
		}))
}

// companyAccess checks the request actor's access to the path's company.
func (s *Service) companyAccess(r *http.Request, write bool) (string, error) {
	companyID, err := httpx.PathID(r, "companyId")
	if err != nil {
		return "", err
	}
	_, err = s.Authz.CompanyAccess(r.Context(), s.Store.DB, httpx.Actor(r), companyID, write)
	return companyID, err
}
