package api

import (
	"net/http"

	"github.com/paperclipai/paperclipai/internal/authz"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/httpx"
	"github.com/paperclipai/paperclipai/internal/store"
)

// meRoutes registers the read-only routes the web UI needs to decide what
// to show: who the board actor is and how many tasks a company has.
func (s *Server) meRoutes() {
	s.Handle("GET /api/me", s.getMe)
	s.Handle("GET /api/companies/{companyId}/issue-counts", s.issueCounts)
}

type meUser struct {
	ID              string `json:"id"`
	Email           string `json:"email"`
	Name            string `json:"name"`
	IsInstanceAdmin bool   `json:"isInstanceAdmin"`
}

type meMembership struct {
	CompanyID            string   `json:"companyId"`
	Role                 string   `json:"role"`
	Permissions          []string `json:"permissions"`
	CanManageConnections bool     `json:"canManageConnections"`
}

// Me describes the calling board actor (GET /api/me).
type Me struct {
	User         meUser         `json:"user"`
	LocalBoard   bool           `json:"localBoard"`
	KeyCompanyID string         `json:"keyCompanyId,omitempty"`
	Memberships  []meMembership `json:"memberships"`
	// Companies are the companies the actor sees, as GET /api/companies
	// lists them, each with the actor's role; present only when asked
	// for (?include=companies), so that a page's chrome takes one call.
	Companies []MeCompany `json:"companies,omitzero"`
}

// MeCompany is a company of GET /api/me?include=companies with the
// actor's role in it: "owner" for the local board, which owns every
// company, and empty for an instance admin who is not a member.
type MeCompany struct {
	domain.Company
	Role string `json:"role,omitempty"`
}

func (s *Server) getMe(w http.ResponseWriter, r *http.Request) error {
	a := httpx.Actor(r)
	if err := authz.RequireBoard(a); err != nil {
		return err
	}
	var withCompanies bool
	switch v := r.URL.Query().Get("include"); v {
	case "":
	case "companies":
		withCompanies = true
	default:
		return httpx.Errorf(http.StatusBadRequest, "include must be companies")
	}
	u, err := s.Store.GetUser(r.Context(), s.Store.DB, a.UserID)
	if err != nil {
		return err
	}
	out := Me{User: meUser{ID: u.ID, Email: u.Email, Name: u.Name, IsInstanceAdmin: a.IsInstanceAdmin || a.LocalBoard},
		LocalBoard: a.LocalBoard, KeyCompanyID: a.KeyCompanyID, Memberships: []meMembership{}}
	// The local board owns every company; it has no membership rows.
	if !a.LocalBoard {
		ms, err := s.Store.ListUserMemberships(r.Context(), s.Store.DB, u.ID)
		if err != nil {
			return err
		}
		for _, m := range ms {
			if a.KeyCompanyID != "" && m.CompanyID != a.KeyCompanyID {
				continue
			}
			acc := authz.Access{CompanyID: m.CompanyID, Role: m.Role, Permissions: m.Permissions}
			out.Memberships = append(out.Memberships, meMembership{CompanyID: m.CompanyID, Role: m.Role, Permissions: m.Permissions,
				CanManageConnections: m.Role != domain.RoleViewer && (a.IsInstanceAdmin || authz.HasPermission(acc, domain.PermManageConnections))})
		}
	}
	if withCompanies {
		if out.Companies, err = s.meCompanies(r, a, out.Memberships); err != nil {
			return err
		}
	}
	httpx.WriteJSON(w, http.StatusOK, out)
	return nil
}

// meCompanies lists the companies a board actor sees (the rule of GET
// /api/companies for board actors) with its role in each, from ms.
func (s *Server) meCompanies(r *http.Request, a authz.Actor, ms []meMembership) ([]MeCompany, error) {
	var cs []domain.Company
	switch {
	case a.KeyCompanyID != "":
		c, err := s.Store.GetCompany(r.Context(), s.Store.DB, a.KeyCompanyID)
		if err != nil {
			return nil, err
		}
		cs = []domain.Company{c}
	case a.LocalBoard || a.IsInstanceAdmin:
		all, err := s.Store.ListCompanies(r.Context(), s.Store.DB, "")
		if err != nil {
			return nil, err
		}
		cs = all
	default:
		mine, err := s.Store.ListCompanies(r.Context(), s.Store.DB, a.UserID)
		if err != nil {
			return nil, err
		}
		cs = mine
	}
	roles := map[string]string{}
	for _, m := range ms {
		roles[m.CompanyID] = m.Role
	}
	out := make([]MeCompany, 0, len(cs))
	for _, c := range cs {
		role := roles[c.ID]
		if a.LocalBoard {
			role = domain.RoleOwner
		}
		out = append(out, MeCompany{Company: c, Role: role})
	}
	return out, nil
}

// IssueCounts is a company's task count by status (GET …/issue-counts).
type IssueCounts struct {
	ByStatus map[string]int `json:"byStatus"`
	Total    int            `json:"total"`
}

func (s *Server) issueCounts(w http.ResponseWriter, r *http.Request) error {
	// Board only: a low-trust agent's view is limited to its boundary,
	// which a plain count would not respect.
	_, companyID, _, err := s.boardCompany(r, false)
	if err != nil {
		return err
	}
	by, err := s.Store.CountIssuesByStatus(r.Context(), s.Store.DB, companyID)
	if err != nil {
		return err
	}
	out := IssueCounts{ByStatus: by}
	for _, n := range by {
		out.Total += n
	}
	httpx.WriteJSON(w, http.StatusOK, out)
	return nil
}

// checkWakeComment validates a wakeup's optional commentId: it must name a
// comment of the wake's task (the run then sees PAPERCLIP_WAKE_COMMENT_ID).
func (s *Server) checkWakeComment(r *http.Request, commentID, issueID string) error {
	if commentID == "" {
		return nil
	}
	if !store.ValidID(commentID) {
		return httpx.Errorf(http.StatusBadRequest, "invalid commentId: must be a UUID")
	}
	if issueID == "" {
		return httpx.Errorf(http.StatusBadRequest, "commentId requires issueId")
	}
	ok, err := s.Store.CommentOnIssue(r.Context(), s.Store.DB, commentID, issueID)
	if err != nil {
		return err
	}
	if !ok {
		return httpx.Errorf(http.StatusBadRequest, "commentId: comment not found on this task")
	}
	return nil
}
