package outbound

import (
	"net/http"

	"github.com/paperclipai/paperclipai/internal/api"
	"github.com/paperclipai/paperclipai/internal/store"
)

// Register mounts the send, thread, delivery and resolve routes.
func (s *Service) Register(srv *api.Server, gate func(r *http.Request) error) {
	h := func(pattern string, fn func(w http.ResponseWriter, r *http.Request) error) {
		srv.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) error {
			if gate != nil {
				if err := gate(r); err != nil {
					return err
				}
			}
			return fn(w, r)
		})
	}
	h("POST /api/companies/{companyId}/email/send", func(w http.ResponseWriter, r *http.Request) error {
		companyID, _, err := srv.CompanyAccess(r, true)
		if err != nil {
			return err
		}
		var req SendRequest
		if err := srv.DecodeJSON(w, r, &req); err != nil {
			return err
		}
		out, err := s.Accept(r.Context(), api.Actor(r), companyID, req)
		if err != nil {
			return err
		}
		api.WriteJSON(w, http.StatusAccepted, out)
		return nil
	})
	// idRoute serves a company route with one UUID path value: read access to
	// the company, a valid id, then fn's result with status.
	idRoute := func(param, badID string, status int, fn func(w http.ResponseWriter, r *http.Request, companyID, id string) (any, error)) func(http.ResponseWriter, *http.Request) error {
		return func(w http.ResponseWriter, r *http.Request) error {
			companyID, _, err := srv.CompanyAccess(r, false)
			if err != nil {
				return err
			}
			id := r.PathValue(param)
			if !store.ValidID(id) {
				return api.Errorf(http.StatusBadRequest, "%s", badID)
			}
			out, err := fn(w, r, companyID, id)
			if err != nil {
				return err
			}
			api.WriteJSON(w, status, out)
			return nil
		}
	}
	h("GET /api/companies/{companyId}/email/tasks/{issueId}", idRoute("issueId", "Task ID must be a UUID", http.StatusOK,
		func(_ http.ResponseWriter, r *http.Request, companyID, id string) (any, error) {
			return s.Thread(r.Context(), api.Actor(r), companyID, id)
		}))
	h("GET /api/companies/{companyId}/email/deliveries/{publicationId}", idRoute("publicationId", "Publication ID must be a UUID", http.StatusOK,
		func(_ http.ResponseWriter, r *http.Request, companyID, id string) (any, error) {
			return s.Delivery(r.Context(), api.Actor(r), companyID, id)
		}))
	h("POST /api/companies/{companyId}/email/deliveries/{publicationId}/resolve", idRoute("publicationId", "Publication ID must be a UUID", http.StatusOK,
		func(w http.ResponseWriter, r *http.Request, companyID, id string) (any, error) {
			var in ResolveInput
			if err := srv.DecodeJSON(w, r, &in); err != nil {
				return nil, err
			}
			return s.Resolve(r.Context(), api.Actor(r), companyID, id, in)
		}))
}
