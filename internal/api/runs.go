package api

import (
	"database/sql"
	"errors"
	"net/http"
	"strings"

	"github.com/paperclipai/paperclipai/internal/authz"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/heartbeat"
	"github.com/paperclipai/paperclipai/internal/httpx"
	"github.com/paperclipai/paperclipai/internal/store"
)

func (s *Server) listRuns(w http.ResponseWriter, r *http.Request) error {
	a := httpx.Actor(r)
	companyID, _, err := s.companyAccess(r, false)
	if err != nil {
		return err
	}
	agentID, err := queryID(r, "agentId")
	if err != nil {
		return err
	}
	issueID, err := s.queryIssueRef(r, companyID, "issueId")
	if err != nil {
		return err
	}
	if a.Kind == authz.KindAgent {
		// Agents see only their own runs.
		agentID = a.AgentID()
	}
	p, err := httpx.PageParams(r)
	if err != nil {
		return err
	}
	rows, err := s.Store.ListRunsPage(r.Context(), s.Store.DB, companyID, agentID, issueID, p)
	if err != nil {
		return err
	}
	items, next := httpx.TrimPage(rows, p, func(run domain.Run) store.Cursor { return store.Cursor{At: run.CreatedAt, ID: run.ID} })
	httpx.WritePage(w, r, items, next)
	return nil
}

// loadRun reads the path's run; agents may read only their own runs.
func (s *Server) loadRun(r *http.Request) (domain.Run, error) {
	id, err := httpx.PathID(r, "runId")
	if err != nil {
		return domain.Run{}, err
	}
	run, err := s.Store.GetRun(r.Context(), s.Store.DB, id)
	if err != nil {
		return run, err
	}
	a := httpx.Actor(r)
	if _, err := s.Authz.CompanyAccess(r.Context(), s.Store.DB, a, run.CompanyID, false); err != nil {
		return run, err
	}
	if a.Kind == authz.KindAgent && run.AgentID != a.AgentID() {
		return run, httpx.Errorf(http.StatusForbidden, "agents may read only their own runs")
	}
	return run, nil
}

// cancelRun stops a queued or running run for a board user with write
// access to its company (owners, admins, members): a queued run is
// cancelled at once; a running run's token dies with the commit and its
// process gets SIGTERM, then SIGKILL after the grace period, on whichever
// replica executes it. It answers 202 with the run; 409 when it has
// already finished.
func (s *Server) cancelRun(w http.ResponseWriter, r *http.Request) error {
	a := httpx.Actor(r)
	if err := authz.RequireBoard(a); err != nil {
		return err
	}
	var body struct {
		Reason string `json:"reason"`
	}
	if r.ContentLength != 0 {
		if err := s.decodeJSON(w, r, &body); err != nil {
			return err
		}
	}
	reason := strings.TrimSpace(body.Reason)
	if len(reason) > 500 {
		return httpx.Errorf(http.StatusBadRequest, "reason must be at most 500 characters")
	}
	if reason == "" {
		reason = "cancelled by a board user"
	}
	run, err := s.loadRun(r)
	if err != nil {
		return err
	}
	if _, err := s.Authz.CompanyAccess(r.Context(), s.Store.DB, a, run.CompanyID, true); err != nil {
		return err
	}
	err = s.Store.Tx(r.Context(), func(tx *sql.Tx) error {
		return s.Heartbeat.CancelRunTx(r.Context(), tx, run, reason, a.AuditActor())
	})
	if errors.Is(err, heartbeat.ErrRunFinished) {
		return httpx.Errorf(http.StatusConflict, "the run has already finished (%s)", run.Status)
	}
	if err != nil {
		return err
	}
	s.Heartbeat.Interrupt(r.Context(), run.ID)
	if run, err = s.Store.GetRun(r.Context(), s.Store.DB, run.ID); err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusAccepted, run)
	return nil
}

func (s *Server) getRun(w http.ResponseWriter, r *http.Request) error {
	run, err := s.loadRun(r)
	return httpx.Respond(w, http.StatusOK, run, err)
}

func (s *Server) getRunLog(w http.ResponseWriter, r *http.Request) error {
	run, err := s.loadRun(r)
	if err != nil {
		return err
	}
	content, size, truncated, err := s.Store.GetRunLog(r.Context(), s.Store.DB, run.ID)
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"runId": run.ID, "status": run.Status, "content": content,
		"sizeBytes": size, "truncated": truncated})
	return nil
}

// requireAdmin gates company administration (secrets, policies) to owners,
// admins and instance administrators.
func (s *Server) requireAdmin(r *http.Request) (string, error) {
	_, companyID, acc, err := s.boardCompany(r, true)
	if err != nil {
		return "", err
	}
	return companyID, authz.RequireRole(acc, domain.RoleOwner, domain.RoleAdmin)
}

func (s *Server) createSecret(w http.ResponseWriter, r *http.Request) error {
	companyID, err := s.requireAdmin(r)
	if err != nil {
		return err
	}
	var body struct {
		Name  string `json:"name"`
		Value string `json:"value"`
	}
	if err := s.decodeJSON(w, r, &body); err != nil {
		return err
	}
	name, err := validName("name", body.Name, 200)
	if err != nil {
		return err
	}
	if body.Value == "" || len(body.Value) > 64<<10 {
		return httpx.Errorf(http.StatusBadRequest, "value is required and must be at most 65536 bytes")
	}
	var sec domain.Secret
	err = s.Store.Tx(r.Context(), func(tx *sql.Tx) error {
		var err error
		if sec, err = s.Vault.CreateSecret(r.Context(), tx, companyID, name, []byte(body.Value)); err != nil {
			if errors.Is(err, store.ErrConflict) {
				return httpx.Errorf(http.StatusConflict, "a secret named %q already exists", name)
			}
			return err
		}
		return s.Audit(r.Context(), tx, httpx.Actor(r), companyID, "secret.created", "secret", sec.ID, map[string]string{"name": name})
	})
	return httpx.Respond(w, http.StatusCreated, sec, err)
}

func (s *Server) listSecrets(w http.ResponseWriter, r *http.Request) error {
	companyID, err := s.requireAdmin(r)
	if err != nil {
		return err
	}
	p, err := httpx.PageParams(r)
	if err != nil {
		return err
	}
	rows, err := s.Store.ListSecrets(r.Context(), s.Store.DB, companyID, p)
	if err != nil {
		return err
	}
	writeListPage(w, r, rows, p, secretCursor)
	return nil
}

// loadSecretAsAdmin reads the path's secret and requires admin access to its company.
func (s *Server) loadSecretAsAdmin(r *http.Request) (domain.Secret, error) {
	a := httpx.Actor(r)
	if err := authz.RequireBoard(a); err != nil {
		return domain.Secret{}, err
	}
	id, err := httpx.PathID(r, "secretId")
	if err != nil {
		return domain.Secret{}, err
	}
	sec, err := s.Store.GetSecret(r.Context(), s.Store.DB, id)
	if err != nil {
		return sec, err
	}
	acc, err := s.Authz.CompanyAccess(r.Context(), s.Store.DB, a, sec.CompanyID, true)
	if err != nil {
		return sec, err
	}
	return sec, authz.RequireRole(acc, domain.RoleOwner, domain.RoleAdmin)
}

func (s *Server) rotateSecret(w http.ResponseWriter, r *http.Request) error {
	sec, err := s.loadSecretAsAdmin(r)
	if err != nil {
		return err
	}
	var body struct {
		Value string `json:"value"`
	}
	if err := s.decodeJSON(w, r, &body); err != nil {
		return err
	}
	if body.Value == "" || len(body.Value) > 64<<10 {
		return httpx.Errorf(http.StatusBadRequest, "value is required and must be at most 65536 bytes")
	}
	err = s.Store.Tx(r.Context(), func(tx *sql.Tx) error {
		v, err := s.Vault.RotateSecret(r.Context(), tx, sec.ID, []byte(body.Value))
		if err != nil {
			return err
		}
		sec.LatestVersion = v
		return s.Audit(r.Context(), tx, httpx.Actor(r), sec.CompanyID, "secret.rotated", "secret", sec.ID, map[string]int{"version": v})
	})
	return httpx.Respond(w, http.StatusOK, sec, err)
}

func (s *Server) deleteSecret(w http.ResponseWriter, r *http.Request) error {
	sec, err := s.loadSecretAsAdmin(r)
	if err != nil {
		return err
	}
	err = s.Store.Tx(r.Context(), func(tx *sql.Tx) error {
		n, err := s.Store.SecretBindingCount(r.Context(), tx, sec.ID)
		if err != nil {
			return err
		}
		if n > 0 {
			return httpx.Errorf(http.StatusConflict, "secret is still bound to %d object(s); disconnect them first", n)
		}
		if err := s.Store.DeleteSecret(r.Context(), tx, sec.ID); err != nil {
			return err
		}
		return s.Audit(r.Context(), tx, httpx.Actor(r), sec.CompanyID, "secret.deleted", "secret", sec.ID, nil)
	})
	if err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) createPolicy(w http.ResponseWriter, r *http.Request) error {
	companyID, err := s.requireAdmin(r)
	if err != nil {
		return err
	}
	var body struct {
		Action                 string `json:"action"`
		ActorKind              string `json:"actorKind"`
		ActorID                string `json:"actorId"`
		Effect                 string `json:"effect"`
		RateLimitCount         int    `json:"rateLimitCount"`
		RateLimitWindowSeconds int    `json:"rateLimitWindowSeconds"`
		Reason                 string `json:"reason"`
	}
	if err := s.decodeJSON(w, r, &body); err != nil {
		return err
	}
	action, err := validName("action", body.Action, 100)
	if err != nil {
		return err
	}
	if body.Effect != "allow" && body.Effect != "deny" {
		return httpx.Errorf(http.StatusBadRequest, "effect must be allow or deny")
	}
	if body.ActorKind == "" {
		body.ActorKind = "*"
	}
	if body.ActorKind != "*" && body.ActorKind != "user" && body.ActorKind != "agent" {
		return httpx.Errorf(http.StatusBadRequest, "actorKind must be *, user or agent")
	}
	if body.ActorID != "" && body.ActorID != "*" && !store.ValidID(body.ActorID) {
		return httpx.Errorf(http.StatusBadRequest, "actorId must be * or a UUID")
	}
	if (body.RateLimitCount > 0) != (body.RateLimitWindowSeconds > 0) || body.RateLimitCount < 0 || body.RateLimitWindowSeconds < 0 {
		return httpx.Errorf(http.StatusBadRequest, "rateLimitCount and rateLimitWindowSeconds go together and must be positive")
	}
	if body.Effect == "deny" && body.RateLimitCount > 0 {
		return httpx.Errorf(http.StatusBadRequest, "rate limits apply to allow policies only")
	}
	p := domain.ActionPolicy{CompanyID: companyID, Action: action, ActorKind: body.ActorKind, ActorID: body.ActorID,
		Effect: body.Effect, RateLimitCount: body.RateLimitCount, RateLimitWindowSeconds: body.RateLimitWindowSeconds, Reason: body.Reason}
	err = s.Store.Tx(r.Context(), func(tx *sql.Tx) error {
		if err := s.Store.CreatePolicy(r.Context(), tx, &p); err != nil {
			return err
		}
		return s.Audit(r.Context(), tx, httpx.Actor(r), companyID, "action_policy.created", "action_policy", p.ID, p)
	})
	return httpx.Respond(w, http.StatusCreated, p, err)
}

func (s *Server) deletePolicy(w http.ResponseWriter, r *http.Request) error {
	companyID, err := s.requireAdmin(r)
	if err != nil {
		return err
	}
	id, err := httpx.PathID(r, "policyId")
	if err != nil {
		return err
	}
	err = s.Store.Tx(r.Context(), func(tx *sql.Tx) error {
		if err := s.Store.DeletePolicy(r.Context(), tx, companyID, id); err != nil {
			return err
		}
		return s.Audit(r.Context(), tx, httpx.Actor(r), companyID, "action_policy.deleted", "action_policy", id, nil)
	})
	if err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
