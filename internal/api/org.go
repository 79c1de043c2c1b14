package api

import (
	"database/sql"
	"net/http"
	"net/mail"
	"slices"
	"strings"

	"github.com/paperclipai/paperclipai/internal/authz"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/httpx"
	"github.com/paperclipai/paperclipai/internal/safetext"
	"github.com/paperclipai/paperclipai/internal/store"
)

func (s *Server) getSettings(w http.ResponseWriter, r *http.Request) error {
	v, err := s.Store.GetSettings(r.Context(), s.Store.DB)
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, v)
	return nil
}

type settingsPatch struct {
	Experimental *struct {
		EnableChatConnectors     *bool `json:"enableChatConnectors"`
		EnableIsolatedWorkspaces *bool `json:"enableIsolatedWorkspaces"`
	} `json:"experimental"`
}

func (s *Server) patchSettings(w http.ResponseWriter, r *http.Request) error {
	a := httpx.Actor(r)
	if err := authz.RequireInstanceAdmin(a); err != nil {
		return err
	}
	var p settingsPatch
	if err := s.decodeJSON(w, r, &p); err != nil {
		return err
	}
	var out domain.InstanceSettings
	err := s.Store.Tx(r.Context(), func(tx *sql.Tx) error {
		v, err := s.Store.GetSettings(r.Context(), tx)
		if err != nil {
			return err
		}
		if p.Experimental != nil {
			if p.Experimental.EnableChatConnectors != nil {
				v.Experimental.EnableChatConnectors = *p.Experimental.EnableChatConnectors
			}
			if p.Experimental.EnableIsolatedWorkspaces != nil {
				v.Experimental.EnableIsolatedWorkspaces = *p.Experimental.EnableIsolatedWorkspaces
			}
		}
		if err := s.Store.PutSettings(r.Context(), tx, v); err != nil {
			return err
		}
		out = v
		return s.Audit(r.Context(), tx, a, "", "instance.settings_updated", "instance", "settings", v)
	})
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, out)
	return nil
}

func validName(field, v string, max int) (string, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return "", httpx.Errorf(http.StatusBadRequest, "%s is required", field)
	}
	if len(v) > max {
		return "", httpx.Errorf(http.StatusBadRequest, "%s must be at most %d characters", field, max)
	}
	if err := safetext.Line(v); err != nil {
		return "", httpx.Errorf(http.StatusBadRequest, "%s must be one line: it %s", field, err)
	}
	return v, nil
}

func (s *Server) createCompany(w http.ResponseWriter, r *http.Request) error {
	a := httpx.Actor(r)
	if err := authz.RequireBoard(a); err != nil {
		return err
	}
	if a.KeyCompanyID != "" {
		return httpx.Errorf(http.StatusForbidden, "a company-scoped board key cannot create companies")
	}
	var body struct {
		Name string `json:"name"`
	}
	if err := s.decodeJSON(w, r, &body); err != nil {
		return err
	}
	name, err := validName("name", body.Name, 200)
	if err != nil {
		return err
	}
	var c domain.Company
	err = s.Store.Tx(r.Context(), func(tx *sql.Tx) error {
		var err error
		if c, err = s.Store.CreateCompany(r.Context(), tx, name, a.UserID); err != nil {
			return err
		}
		return s.Audit(r.Context(), tx, a, c.ID, "company.created", "company", c.ID, map[string]string{"name": name})
	})
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusCreated, c)
	return nil
}

func (s *Server) listCompanies(w http.ResponseWriter, r *http.Request) error {
	a := httpx.Actor(r)
	var out []domain.Company
	var err error
	switch {
	case a.Kind == authz.KindAgent:
		var c domain.Company
		c, err = s.Store.GetCompany(r.Context(), s.Store.DB, a.Agent.CompanyID)
		out = []domain.Company{c}
	case a.KeyCompanyID != "":
		var c domain.Company
		c, err = s.Store.GetCompany(r.Context(), s.Store.DB, a.KeyCompanyID)
		out = []domain.Company{c}
	case a.LocalBoard || a.IsInstanceAdmin:
		out, err = s.Store.ListCompanies(r.Context(), s.Store.DB, "")
	default:
		out, err = s.Store.ListCompanies(r.Context(), s.Store.DB, a.UserID)
	}
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) getCompany(w http.ResponseWriter, r *http.Request) error {
	companyID, _, err := s.companyAccess(r, false)
	if err != nil {
		return err
	}
	c, err := s.Store.GetCompany(r.Context(), s.Store.DB, companyID)
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, c)
	return nil
}

var knownPermissions = []string{domain.PermManageConnections}

func (s *Server) addMember(w http.ResponseWriter, r *http.Request) error {
	a := httpx.Actor(r)
	if err := authz.RequireBoard(a); err != nil {
		return err
	}
	companyID, acc, err := s.companyAccess(r, true)
	if err != nil {
		return err
	}
	if err := authz.RequireRole(acc, domain.RoleOwner, domain.RoleAdmin); err != nil {
		return err
	}
	var body struct {
		UserID      string   `json:"userId"`
		Email       string   `json:"email"`
		Name        string   `json:"name"`
		Role        string   `json:"role"`
		Permissions []string `json:"permissions"`
	}
	if err := s.decodeJSON(w, r, &body); err != nil {
		return err
	}
	if !slices.Contains([]string{domain.RoleOwner, domain.RoleAdmin, domain.RoleMember, domain.RoleViewer}, body.Role) {
		return httpx.Errorf(http.StatusBadRequest, "role must be one of owner, admin, member, viewer")
	}
	if body.Role == domain.RoleOwner && acc.Role != domain.RoleOwner {
		return httpx.Errorf(http.StatusForbidden, "only owners can add owners")
	}
	for _, p := range body.Permissions {
		if !slices.Contains(knownPermissions, p) {
			return httpx.Errorf(http.StatusBadRequest, "unknown permission %q", p)
		}
	}
	if (body.UserID == "") == (body.Email == "") {
		return httpx.Errorf(http.StatusBadRequest, "give exactly one of userId or email")
	}
	if body.UserID != "" && !store.ValidID(body.UserID) {
		return httpx.Errorf(http.StatusBadRequest, "invalid userId: must be a UUID")
	}
	if body.Email != "" {
		addr, err := mail.ParseAddress(body.Email)
		if err != nil || addr.Address != strings.TrimSpace(body.Email) || safetext.Token(addr.Address) != nil {
			return httpx.Errorf(http.StatusBadRequest, "email is not a valid address")
		}
	}
	var m domain.Membership
	err = s.Store.Tx(r.Context(), func(tx *sql.Tx) error {
		userID := body.UserID
		if body.Email != "" {
			u, err := s.Store.EnsureUser(r.Context(), tx, body.Email, body.Name, false)
			if err != nil {
				return err
			}
			userID = u.ID
		} else if _, err := s.Store.GetUser(r.Context(), tx, userID); err != nil {
			return err
		}
		var err error
		if m, err = s.Store.PutMembership(r.Context(), tx, companyID, userID, body.Role, body.Permissions); err != nil {
			return err
		}
		return s.Audit(r.Context(), tx, a, companyID, "company.member_put", "user", userID,
			map[string]any{"role": body.Role, "permissions": m.Permissions})
	})
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusCreated, m)
	return nil
}

func (s *Server) listMembers(w http.ResponseWriter, r *http.Request) error {
	if err := authz.RequireBoard(httpx.Actor(r)); err != nil {
		return err
	}
	companyID, _, err := s.companyAccess(r, false)
	if err != nil {
		return err
	}
	ms, err := s.Store.ListMembers(r.Context(), s.Store.DB, companyID)
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, ms)
	return nil
}

func (s *Server) createBoardKey(w http.ResponseWriter, r *http.Request) error {
	a := httpx.Actor(r)
	if err := authz.RequireBoard(a); err != nil {
		return err
	}
	companyID, acc, err := s.companyAccess(r, true)
	if err != nil {
		return err
	}
	var body struct {
		UserID string `json:"userId"`
		Name   string `json:"name"`
	}
	if r.ContentLength != 0 {
		if err := s.decodeJSON(w, r, &body); err != nil {
			return err
		}
	}
	userID := a.UserID
	if body.UserID != "" && body.UserID != a.UserID {
		if !store.ValidID(body.UserID) {
			return httpx.Errorf(http.StatusBadRequest, "invalid userId: must be a UUID")
		}
		// Minting a key for someone else is an administrative act.
		if err := authz.RequireRole(acc, domain.RoleOwner, domain.RoleAdmin); err != nil {
			return err
		}
		if _, err := s.Store.GetMembership(r.Context(), s.Store.DB, companyID, body.UserID); err != nil {
			return httpx.Errorf(http.StatusBadRequest, "userId is not a member of this company")
		}
		userID = body.UserID
	}
	var key domain.BoardAPIKey
	var token string
	err = s.Store.Tx(r.Context(), func(tx *sql.Tx) error {
		var err error
		if key, token, err = s.Store.CreateBoardKey(r.Context(), tx, userID, companyID, strings.TrimSpace(body.Name)); err != nil {
			return err
		}
		return s.Audit(r.Context(), tx, a, companyID, "board_key.created", "board_api_key", key.ID, map[string]string{"userId": userID})
	})
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusCreated, struct {
		domain.BoardAPIKey
		Token string `json:"token"`
	}{key, token})
	return nil
}
