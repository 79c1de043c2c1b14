package api

import (
	"context"
	"database/sql"
	"errors"
	"net/http"
	"os"
	"time"

	"github.com/paperclipai/paperclipai/internal/authz"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/heartbeat"
	"github.com/paperclipai/paperclipai/internal/httpx"
	"github.com/paperclipai/paperclipai/internal/store"
)

// companyRunsStopWait bounds how long a delete waits for the company's
// cancelled runs to end before it answers 409 (try again).
const companyRunsStopWait = 30 * time.Second

// ownerCompany is the opening of an owners-only company route: a board
// actor with write access to the path's company and the owner role there
// (403 "only owners can <verb> the company" otherwise).
func (s *Server) ownerCompany(r *http.Request, verb string) (authz.Actor, string, error) {
	a, companyID, acc, err := s.boardCompany(r, true)
	if err != nil {
		return a, companyID, err
	}
	if err := authz.RequireRole(acc, domain.RoleOwner); err != nil {
		return a, companyID, httpx.Errorf(http.StatusForbidden, "only owners can %s the company", verb)
	}
	return a, companyID, nil
}

// renameCompany changes a company's name (owners only).
func (s *Server) renameCompany(w http.ResponseWriter, r *http.Request) error {
	a, companyID, err := s.ownerCompany(r, "rename")
	if err != nil {
		return err
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
		before, err := s.Store.GetCompany(r.Context(), tx, companyID)
		if err != nil {
			return err
		}
		if c, err = s.Store.RenameCompany(r.Context(), tx, companyID, name); err != nil {
			return err
		}
		return s.Audit(r.Context(), tx, a, companyID, "company.renamed", "company", companyID,
			map[string]string{"from": before.Name, "name": name})
	})
	return httpx.Respond(w, http.StatusOK, c, err)
}

// deleteCompany deletes a company and everything Paperclip holds for it
// (docs/api.md, "Deleting a company"). Owners only, and the body must
// repeat the company's name ({"confirmName": …}), so a stray DELETE never
// removes one. Its work stops first, in order: its agents are paused and
// their runs cancelled (no new run can start), its inboxes are
// disconnected (sockets closed, Paperclip's webhooks and runtime keys
// removed at the provider, queued sends settled), and the delete waits
// until no run executes; only then does one transaction delete the rows.
func (s *Server) deleteCompany(w http.ResponseWriter, r *http.Request) error {
	a, companyID, err := s.ownerCompany(r, "delete")
	if err != nil {
		return err
	}
	var body struct {
		ConfirmName string `json:"confirmName"`
	}
	if err := s.decodeJSON(w, r, &body); err != nil {
		return err
	}
	ctx := r.Context()
	c, err := s.Store.GetCompany(ctx, s.Store.DB, companyID)
	if err != nil {
		return err
	}
	if body.ConfirmName != c.Name {
		return httpx.Errorf(http.StatusBadRequest, "confirmName must be the company's name exactly")
	}
	if err := s.stopCompanyWork(ctx, a, companyID); err != nil {
		return err
	}
	err = s.Store.Tx(ctx, func(tx *sql.Tx) error {
		// Why check again inside the delete's transaction: a run claimed
		// between the wait and here would lose its rows under it.
		n, err := s.Store.CountRunningCompanyRuns(ctx, tx, companyID)
		if err != nil {
			return err
		}
		if n > 0 {
			return httpx.Errorf(http.StatusConflict, "the company's runs are still stopping; try again in a moment")
		}
		return s.Store.DeleteCompany(ctx, tx, companyID)
	})
	if err != nil {
		return err
	}
	// The company's activity log went with it: the server log keeps the
	// record of who deleted what.
	s.log.Info("company deleted", "company", companyID, "name", c.Name, "user", a.UserID)
	s.removeCompanyWorkspaces(companyID)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// stopCompanyWork pauses the company's agents, cancels their running runs,
// disconnects its inboxes and waits (bounded) until no run executes.
func (s *Server) stopCompanyWork(ctx context.Context, a authz.Actor, companyID string) error {
	var interrupt []string
	err := s.Store.Tx(ctx, func(tx *sql.Tx) error {
		agents, err := s.Store.PauseCompanyAgents(ctx, tx, companyID)
		if err != nil {
			return err
		}
		for _, id := range agents {
			ids, err := s.Heartbeat.CancelAgentRunsTx(ctx, tx, id, "company deleted", a.AuditActor())
			if err != nil {
				return err
			}
			interrupt = append(interrupt, ids...)
		}
		return s.Audit(ctx, tx, a, companyID, "company.delete_started", "company", companyID, nil)
	})
	if err != nil {
		return err
	}
	s.Heartbeat.Interrupt(ctx, interrupt...)
	if s.StopCompanyEmail != nil {
		if err := s.StopCompanyEmail(ctx, a, companyID); err != nil {
			return err
		}
	}
	deadline := time.Now().Add(companyRunsStopWait)
	for {
		n, err := s.Store.CountRunningCompanyRuns(ctx, s.Store.DB, companyID)
		if err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return httpx.Errorf(http.StatusConflict, "the company's runs are still stopping; try again in a moment")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// removeCompanyWorkspaces removes the company's task directories of both
// run modes (heartbeat.TaskDirectory); a failure is logged, never
// returned: the company is already gone.
func (s *Server) removeCompanyWorkspaces(companyID string) {
	root := s.cfg.WorkspacesDir()
	if root == "" || !store.ValidID(companyID) {
		return
	}
	for _, sandboxed := range []bool{false, true} {
		dir := heartbeat.TaskDirectory(root, companyID, "", sandboxed)
		if err := os.RemoveAll(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
			s.log.Warn("remove deleted company's workspaces", "dir", dir, "err", err)
		}
	}
}
