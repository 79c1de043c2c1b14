package api

import (
	"database/sql"
	"errors"
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

var knownPermissions = []string{domain.PermManageConnections}

// addMember creates or changes a membership. Owners and admins manage
// members; only owners grant the owner role or change an owner; the last
// owner keeps the role.
func (s *Server) addMember(w http.ResponseWriter, r *http.Request) error {
	a, companyID, acc, err := s.boardCompany(r, true)
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
		cur, err := s.Store.LockMemberships(r.Context(), tx, companyID, userID, body.Role)
		if cur.Role == domain.RoleOwner && acc.Role != domain.RoleOwner {
			return httpx.Errorf(http.StatusForbidden, "only owners can change an owner's membership")
		}
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err // ErrLastOwner among them
		}
		if m, err = s.Store.PutMembership(r.Context(), tx, companyID, userID, body.Role, body.Permissions); err != nil {
			return err
		}
		return s.Audit(r.Context(), tx, a, companyID, "company.member_put", "user", userID,
			map[string]any{"role": body.Role, "permissions": m.Permissions})
	})
	return httpx.Respond(w, http.StatusCreated, m, err)
}

// removeMember takes a user out of a company and revokes the user's keys
// scoped to it. Owners and admins remove members, anyone may leave, only
// owners remove owners, and the last owner stays.
func (s *Server) removeMember(w http.ResponseWriter, r *http.Request) error {
	a, companyID, acc, err := s.boardCompany(r, true)
	if err != nil {
		return err
	}
	userID, err := httpx.PathID(r, "userId")
	if err != nil {
		return err
	}
	self := userID == a.UserID
	if !self {
		if err := authz.RequireRole(acc, domain.RoleOwner, domain.RoleAdmin); err != nil {
			return err
		}
	}
	err = s.Store.Tx(r.Context(), func(tx *sql.Tx) error {
		cur, err := s.Store.LockMemberships(r.Context(), tx, companyID, userID, "")
		if errors.Is(err, store.ErrNotFound) {
			return httpx.Errorf(http.StatusNotFound, "membership not found")
		}
		if cur.Role == domain.RoleOwner && acc.Role != domain.RoleOwner {
			return httpx.Errorf(http.StatusForbidden, "only owners can remove an owner")
		}
		if err != nil {
			return err
		}
		if err := s.Store.DeleteMembership(r.Context(), tx, companyID, userID); err != nil {
			return err
		}
		return s.Audit(r.Context(), tx, a, companyID, "company.member_removed", "user", userID, map[string]any{"role": cur.Role})
	})
	if err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
