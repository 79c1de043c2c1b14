package retention

import (
	"net/http"

	"github.com/paperclipai/paperclipai/internal/authz"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/httpx"
)

// settingsView is GET /api/companies/{companyId}/retention: the settings
// and the space each kind of retained data uses now.
type settingsView struct {
	Settings
	Usage Usage `json:"usage"`
}

// Routes registers the retention API: board members with read access see
// the settings and usage; only owners change them.
func (s *Service) Routes(rt httpx.Router, az *authz.Service) {
	access := func(r *http.Request, write bool) (string, authz.Access, error) {
		a := httpx.Actor(r)
		if err := authz.RequireBoard(a); err != nil {
			return "", authz.Access{}, err
		}
		companyID, err := httpx.PathID(r, "companyId")
		if err != nil {
			return "", authz.Access{}, err
		}
		acc, err := az.CompanyAccess(r.Context(), s.Store.DB, a, companyID, write)
		return companyID, acc, err
	}
	rt.Handle("GET /api/companies/{companyId}/retention", func(w http.ResponseWriter, r *http.Request) error {
		companyID, _, err := access(r, false)
		if err != nil {
			return err
		}
		set, err := s.Get(r.Context(), companyID)
		if err != nil {
			return err
		}
		u, err := s.Usage(r.Context(), companyID)
		if err != nil {
			return err
		}
		httpx.WriteJSON(w, http.StatusOK, settingsView{Settings: set, Usage: u})
		return nil
	})
	rt.Handle("PUT /api/companies/{companyId}/retention", func(w http.ResponseWriter, r *http.Request) error {
		companyID, acc, err := access(r, true)
		if err != nil {
			return err
		}
		if err := authz.RequireRole(acc, domain.RoleOwner); err != nil {
			return httpx.Errorf(http.StatusForbidden, "only company owners change data retention")
		}
		var set Settings
		if err := httpx.DecodeJSON(w, r, 4<<10, &set); err != nil {
			return err
		}
		if err := set.Validate(); err != nil {
			return httpx.Errorf(http.StatusBadRequest, "%s", err.Error())
		}
		if err := s.Put(r.Context(), companyID, set, httpx.Actor(r).AuditActor()); err != nil {
			return err
		}
		httpx.WriteJSON(w, http.StatusOK, set)
		return nil
	})
}
