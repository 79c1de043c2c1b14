package api

import (
	"database/sql"
	"net/http"
	"slices"
	"strings"

	"github.com/paperclipai/paperclipai/internal/agentcli"
	"github.com/paperclipai/paperclipai/internal/authz"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/httpx"
	"github.com/paperclipai/paperclipai/internal/safetext"
	"github.com/paperclipai/paperclipai/internal/store"
)

func (s *Server) getSettings(w http.ResponseWriter, r *http.Request) error {
	v, err := s.Store.GetSettings(r.Context(), s.Store.DB)
	return httpx.Respond(w, http.StatusOK, v, err)
}

type settingsPatch struct {
	Experimental *struct {
		EnableChatConnectors     *bool `json:"enableChatConnectors"`
		EnableIsolatedWorkspaces *bool `json:"enableIsolatedWorkspaces"`
	} `json:"experimental"`
	// AgentCLI replaces the settings of the named CLI adapters (null
	// removes them).
	AgentCLI map[string]*domain.AgentCLISettings `json:"agentCli"`
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
		for typ, c := range p.AgentCLI {
			if !slices.Contains(agentcli.Types, typ) {
				return httpx.Errorf(http.StatusBadRequest, "agentCli: unknown adapter %q (claude_local or codex_local)", typ)
			}
			if c == nil {
				delete(v.AgentCLI, typ)
				continue
			}
			if err := agentcli.CheckSettings(*c); err != nil {
				return httpx.Errorf(http.StatusBadRequest, "agentCli.%s: %s", typ, strings.TrimPrefix(err.Error(), agentcli.ErrInvalidConfig.Error()+": "))
			}
			if v.AgentCLI == nil {
				v.AgentCLI = map[string]domain.AgentCLISettings{}
			}
			v.AgentCLI[typ] = *c
		}
		if err := s.Store.PutSettings(r.Context(), tx, v); err != nil {
			return err
		}
		out = v
		return s.Audit(r.Context(), tx, a, "", "instance.settings_updated", "instance", "settings", v)
	})
	return httpx.Respond(w, http.StatusOK, out, err)
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
	return httpx.Respond(w, http.StatusCreated, c, err)
}

func (s *Server) listCompanies(w http.ResponseWriter, r *http.Request) error {
	a := httpx.Actor(r)
	p, err := httpx.PageParams(r)
	if err != nil {
		return err
	}
	one := ""
	switch {
	case a.Kind == authz.KindAgent:
		one = a.Agent.CompanyID
	case a.KeyCompanyID != "":
		one = a.KeyCompanyID
	}
	if one != "" {
		// A single company: one page, which no cursor continues.
		out := []domain.Company{}
		if p.After == nil {
			c, err := s.Store.GetCompany(r.Context(), s.Store.DB, one)
			if err != nil {
				return err
			}
			out = append(out, c)
		}
		httpx.WritePage(w, r, out, nil)
		return nil
	}
	userID := a.UserID
	if a.LocalBoard || a.IsInstanceAdmin {
		userID = ""
	}
	rows, err := s.Store.ListCompaniesPage(r.Context(), s.Store.DB, userID, p)
	if err != nil {
		return err
	}
	writeListPage(w, r, rows, p, companyCursor)
	return nil
}

func (s *Server) getCompany(w http.ResponseWriter, r *http.Request) error {
	companyID, _, err := s.companyAccess(r, false)
	if err != nil {
		return err
	}
	c, err := s.Store.GetCompany(r.Context(), s.Store.DB, companyID)
	return httpx.Respond(w, http.StatusOK, c, err)
}

// oneOf refuses a field value that is not one of allowed.
func oneOf(field, v string, allowed []string) error {
	if !slices.Contains(allowed, v) {
		return httpx.Errorf(http.StatusBadRequest, "%s must be one of %s", field, strings.Join(allowed, ", "))
	}
	return nil
}

// companyRef checks an optional reference field: empty, or the UUID of a
// thing (what) of companyID; companyOf reads the company of an id.
func companyRef(field, v, what, companyID string, companyOf func(id string) (string, error)) error {
	if v == "" {
		return nil
	}
	if !store.ValidID(v) {
		return httpx.Errorf(http.StatusBadRequest, "invalid %s: must be a UUID", field)
	}
	if c, err := companyOf(v); err != nil || c != companyID {
		return httpx.Errorf(http.StatusBadRequest, "%s: %s not found in this company", field, what)
	}
	return nil
}
