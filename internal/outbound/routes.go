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
	h("GET /api/companies/{companyId}/email/tasks/{issueId}", func(w http.ResponseWriter, r *http.Request) error {
		companyID, _, err := srv.CompanyAccess(r, false)
		if err != nil {
			return err
		}
		issueID := r.PathValue("issueId")
		if !store.ValidID(issueID) {
			return api.Errorf(http.StatusBadRequest, "Task ID must be a UUID")
		}
		out, err := s.Thread(r.Context(), api.Actor(r), companyID, issueID)
		if err != nil {
			return err
		}
		api.WriteJSON(w, http.StatusOK, out)
		return nil
	})
	h("GET /api/companies/{companyId}/email/deliveries/{publicationId}", func(w http.ResponseWriter, r *http.Request) error {
		companyID, _, err := srv.CompanyAccess(r, false)
		if err != nil {
			return err
		}
		id := r.PathValue("publicationId")
		if !store.ValidID(id) {
			return api.Errorf(http.StatusBadRequest, "Publication ID must be a UUID")
		}
		out, err := s.Delivery(r.Context(), api.Actor(r), companyID, id)
		if err != nil {
			return err
		}
		api.WriteJSON(w, http.StatusOK, out)
		return nil
	})
	h("POST /api/companies/{companyId}/email/deliveries/{publicationId}/resolve", func(w http.ResponseWriter, r *http.Request) error {
		companyID, _, err := srv.CompanyAccess(r, false)
		if err != nil {
			return err
		}
		id := r.PathValue("publicationId")
		if !store.ValidID(id) {
			return api.Errorf(http.StatusBadRequest, "Publication ID must be a UUID")
		}
		var in ResolveInput
		if err := srv.DecodeJSON(w, r, &in); err != nil {
			return err
		}
		out, err := s.Resolve(r.Context(), api.Actor(r), companyID, id, in)
		if err != nil {
			return err
		}
		api.WriteJSON(w, http.StatusOK, out)
		return nil
	})
}
