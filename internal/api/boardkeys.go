package api

import (
	"database/sql"
	"errors"
	"net/http"
	"strings"

	"github.com/paperclipai/paperclipai/internal/authz"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/httpx"
	"github.com/paperclipai/paperclipai/internal/store"
)

// createBoardKey mints a company-scoped board key. Every board writer may
// mint one for themselves; only an instance administrator may issue one
// for another member (onboarding), since a key acts as its user.
func (s *Server) createBoardKey(w http.ResponseWriter, r *http.Request) error {
	a, companyID, _, err := s.boardCompany(r, true)
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
	name := strings.TrimSpace(body.Name)
	if name != "" {
		if name, err = validName("name", name, 200); err != nil {
			return err
		}
	}
	userID := a.UserID
	if body.UserID != "" && body.UserID != a.UserID {
		if !store.ValidID(body.UserID) {
			return httpx.Errorf(http.StatusBadRequest, "invalid userId: must be a UUID")
		}
		if authz.RequireInstanceAdmin(a) != nil {
			return httpx.Errorf(http.StatusForbidden, "only an instance administrator may issue a board key for another user; members mint their own")
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
		if key, token, err = s.Store.CreateBoardKey(r.Context(), tx, userID, companyID, name); err != nil {
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

// listCompanyBoardKeys lists a company's active keys: all of them to its
// owners and admins, the caller's own to everyone else.
func (s *Server) listCompanyBoardKeys(w http.ResponseWriter, r *http.Request) error {
	a, companyID, acc, err := s.boardCompany(r, false)
	if err != nil {
		return err
	}
	f := store.BoardKeyFilter{CompanyID: companyID}
	if authz.RequireRole(acc, domain.RoleOwner, domain.RoleAdmin) != nil {
		f.UserID = a.UserID
	}
	return s.writeBoardKeys(w, r, f)
}

// listBoardKeys lists the caller's own active keys of every scope (a
// company-scoped key sees only its company's); an instance administrator
// sees every active key of the instance.
func (s *Server) listBoardKeys(w http.ResponseWriter, r *http.Request) error {
	a := httpx.Actor(r)
	if err := authz.RequireBoard(a); err != nil {
		return err
	}
	f := store.BoardKeyFilter{UserID: a.UserID, CompanyID: a.KeyCompanyID}
	if authz.RequireInstanceAdmin(a) == nil {
		f = store.BoardKeyFilter{}
	}
	return s.writeBoardKeys(w, r, f)
}

// writeBoardKeys answers a page of the active board keys f selects.
func (s *Server) writeBoardKeys(w http.ResponseWriter, r *http.Request, f store.BoardKeyFilter) error {
	p, err := httpx.PageParams(r)
	if err != nil {
		return err
	}
	keys, err := s.Store.ListBoardKeys(r.Context(), s.Store.DB, f, p)
	if err != nil {
		return err
	}
	writeListPage(w, r, keys, p, boardKeyCursor)
	return nil
}

// revokeBoardKey revokes a key at once. Its user, an instance
// administrator, or an owner or admin of the key's company may revoke it;
// an owner's key only by an owner.
func (s *Server) revokeBoardKey(w http.ResponseWriter, r *http.Request) error {
	a := httpx.Actor(r)
	if err := authz.RequireBoard(a); err != nil {
		return err
	}
	id, err := httpx.PathID(r, "keyId")
	if err != nil {
		return err
	}
	ctx := r.Context()
	notFound := httpx.Errorf(http.StatusNotFound, "board key not found")
	k, err := s.Store.GetBoardKey(ctx, s.Store.DB, id)
	if errors.Is(err, store.ErrNotFound) {
		return notFound
	}
	if err != nil {
		return err
	}
	if err := s.mayRevoke(r, a, k); err != nil {
		return err
	}
	err = s.Store.Tx(ctx, func(tx *sql.Tx) error {
		if err := s.Store.RevokeBoardKey(ctx, tx, k.ID); err != nil {
			return err
		}
		return s.Audit(ctx, tx, a, k.CompanyID, "board_key.revoked", "board_api_key", k.ID, map[string]string{"userId": k.UserID})
	})
	if err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// mayRevoke decides revokeBoardKey's permission; a key the actor may not
// see at all is 404.
func (s *Server) mayRevoke(r *http.Request, a authz.Actor, k domain.BoardAPIKey) error {
	notFound := httpx.Errorf(http.StatusNotFound, "board key not found")
	if a.KeyCompanyID != "" && k.CompanyID != a.KeyCompanyID {
		return notFound
	}
	if k.UserID == a.UserID || authz.RequireInstanceAdmin(a) == nil {
		return nil
	}
	if k.CompanyID == "" {
		return notFound
	}
	acc, err := s.Authz.CompanyAccess(r.Context(), s.Store.DB, a, k.CompanyID, true)
	if errors.Is(err, store.ErrNotFound) {
		return notFound
	}
	if err != nil {
		return err
	}
	if err := authz.RequireRole(acc, domain.RoleOwner, domain.RoleAdmin); err != nil {
		return httpx.Errorf(http.StatusForbidden, "only the key's user or an owner or admin of its company may revoke it")
	}
	if acc.Role != domain.RoleOwner {
		m, err := s.Store.GetMembership(r.Context(), s.Store.DB, k.CompanyID, k.UserID)
		if err == nil && m.Role == domain.RoleOwner {
			return httpx.Errorf(http.StatusForbidden, "only owners can revoke an owner's key")
		}
	}
	return nil
}
