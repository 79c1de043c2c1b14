package api

import (
	"database/sql"
	"net/http"
	"slices"

	"github.com/paperclipai/paperclipai/internal/authz"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/httpx"
)

// checkAllowNetwork guards the network switch of an environment: only a
// sandbox has one, and only an instance administrator may turn it on. It
// lets sandboxed CLI agents reach their model provider (through the run's
// egress proxy, which admits only the provider hosts the instance allows),
// so it is a decision about data leaving the host, not a company's.
func checkAllowNetwork(a authz.Actor, driver string, allow bool) error {
	if !allow {
		return nil
	}
	if driver != "sandbox" {
		return httpx.Errorf(http.StatusBadRequest, "allowNetwork applies to sandbox environments only")
	}
	if err := authz.RequireInstanceAdmin(a); err != nil {
		return httpx.Errorf(http.StatusForbidden, "only an instance administrator may allow network for a sandbox environment")
	}
	return nil
}

// patchEnvironment changes an environment's status or network switch.
func (s *Server) patchEnvironment(w http.ResponseWriter, r *http.Request) error {
	a := httpx.Actor(r)
	if err := authz.RequireBoard(a); err != nil {
		return err
	}
	id, err := httpx.PathID(r, "environmentId")
	if err != nil {
		return err
	}
	var body struct {
		Status       *string `json:"status"`
		AllowNetwork *bool   `json:"allowNetwork"`
	}
	if err := s.decodeJSON(w, r, &body); err != nil {
		return err
	}
	var e domain.Environment
	err = s.Store.Tx(r.Context(), func(tx *sql.Tx) error {
		if e, err = s.Store.GetEnvironment(r.Context(), tx, id); err != nil {
			return err
		}
		acc, err := s.Authz.CompanyAccess(r.Context(), tx, a, e.CompanyID, true)
		if err != nil {
			return err
		}
		if err := authz.RequireRole(acc, domain.RoleOwner, domain.RoleAdmin); err != nil {
			return err
		}
		if body.Status != nil {
			if !slices.Contains([]string{"active", "inactive", "error"}, *body.Status) {
				return httpx.Errorf(http.StatusBadRequest, "status must be active, inactive or error")
			}
			e.Status = *body.Status
		}
		if body.AllowNetwork != nil {
			// Turning it off is always allowed; on needs an administrator.
			if err := checkAllowNetwork(a, e.Driver, *body.AllowNetwork); err != nil {
				return err
			}
			e.AllowNetwork = *body.AllowNetwork
		}
		if err := s.Store.UpdateEnvironment(r.Context(), tx, &e); err != nil {
			return err
		}
		return s.Audit(r.Context(), tx, a, e.CompanyID, "environment.updated", "environment", e.ID,
			map[string]any{"status": e.Status, "allowNetwork": e.AllowNetwork})
	})
	return httpx.Respond(w, http.StatusOK, e, err)
}
