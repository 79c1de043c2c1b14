package api

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strings"

	"github.com/paperclipai/paperclipai/internal/agentcli"
	"github.com/paperclipai/paperclipai/internal/authz"
	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/heartbeat"
	"github.com/paperclipai/paperclipai/internal/httpx"
	"github.com/paperclipai/paperclipai/internal/sandbox"
	"github.com/paperclipai/paperclipai/internal/store"
)

// strictUnmarshal decodes raw into v rejecting unknown fields.
func strictUnmarshal(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// validateAdapter checks an adapter type and its config, returning the
// normalized config JSON.
func validateAdapter(typ string, raw json.RawMessage) (json.RawMessage, error) {
	if len(raw) == 0 || string(raw) == "null" {
		if typ != agentcli.Claude && typ != agentcli.Codex {
			return nil, httpx.Errorf(http.StatusBadRequest, "adapterConfig is required")
		}
		raw = json.RawMessage("{}")
	}
	switch typ {
	case "process":
		var c domain.ProcessAdapterConfig
		if err := strictUnmarshal(raw, &c); err != nil {
			return nil, httpx.Errorf(http.StatusBadRequest, "invalid adapterConfig for process: %s", httpx.JSONErrorText(err))
		}
		if strings.TrimSpace(c.Command) == "" {
			return nil, httpx.Errorf(http.StatusBadRequest, "adapterConfig.command is required for the process adapter")
		}
		if c.TimeoutSec < 0 || c.TimeoutSec > 86400 {
			return nil, httpx.Errorf(http.StatusBadRequest, "adapterConfig.timeoutSec must be between 0 and 86400")
		}
		for k := range c.Env {
			if strings.HasPrefix(k, "PAPERCLIP_") {
				return nil, httpx.Errorf(http.StatusBadRequest, "adapterConfig.env may not set %s (PAPERCLIP_* variables are set per run)", k)
			}
		}
		return json.Marshal(c)
	case "http":
		var c domain.HTTPAdapterConfig
		if err := strictUnmarshal(raw, &c); err != nil {
			return nil, httpx.Errorf(http.StatusBadRequest, "invalid adapterConfig for http: %s", httpx.JSONErrorText(err))
		}
		u, err := url.Parse(c.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, httpx.Errorf(http.StatusBadRequest, "adapterConfig.url must be an http(s) URL")
		}
		return json.Marshal(c)
	case agentcli.Claude, agentcli.Codex:
		// The command, its install directory and credentials are instance
		// settings (agentCli); an agent chooses only model and limits.
		c, err := agentcli.ParseConfig(typ, raw)
		if err != nil {
			return nil, httpx.Errorf(http.StatusBadRequest, "invalid adapterConfig for %s: %s", typ, strings.TrimPrefix(err.Error(), agentcli.ErrInvalidConfig.Error()+": "))
		}
		return json.Marshal(c)
	}
	return nil, httpx.Errorf(http.StatusBadRequest, "adapterType must be process, http, claude_local or codex_local")
}

// validatePermissions checks trust settings and that boundary references
// belong to the company.
func (s *Server) validatePermissions(ctx context.Context, q db.Querier, companyID string, p *domain.AgentPermissions) error {
	if p.TrustPreset == "" {
		p.TrustPreset = domain.TrustStandard
	}
	if p.TrustPreset != domain.TrustStandard && p.TrustPreset != domain.TrustLowTrustReview {
		return httpx.Errorf(http.StatusBadRequest, "permissions.trustPreset must be standard or low_trust_review")
	}
	b := p.Boundary()
	if b == nil {
		return nil
	}
	if b.CompanyID != "" && b.CompanyID != companyID {
		return httpx.Errorf(http.StatusBadRequest, "trustBoundary.companyId must be the agent's company")
	}
	for _, pid := range b.ProjectIDs {
		if !store.ValidID(pid) {
			return httpx.Errorf(http.StatusBadRequest, "trustBoundary.projectIds: invalid id")
		}
		pr, err := s.Store.GetProject(ctx, q, pid)
		if err != nil || pr.CompanyID != companyID {
			return httpx.Errorf(http.StatusBadRequest, "trustBoundary.projectIds: project %s not found in this company", pid)
		}
	}
	if b.RootIssueID != "" {
		// The task's UUID or its identifier; the UUID is what is stored.
		id, err := s.bodyIssueRef(ctx, q, companyID, "trustBoundary.rootIssueId", b.RootIssueID)
		if err != nil {
			return err
		}
		b.RootIssueID = id
		is, err := s.Store.GetIssue(ctx, q, b.RootIssueID)
		if err != nil || is.CompanyID != companyID {
			return httpx.Errorf(http.StatusBadRequest, "trustBoundary.rootIssueId: task not found in this company")
		}
	}
	return nil
}

func (s *Server) checkEnvironment(ctx context.Context, q db.Querier, companyID, envID string) error {
	return companyRef("environmentId", envID, "environment", companyID, func(id string) (string, error) {
		e, err := s.Store.GetEnvironment(ctx, q, id)
		return e.CompanyID, err
	})
}

type agentInput struct {
	Name               *string                  `json:"name"`
	Status             *string                  `json:"status"`
	AdapterType        *string                  `json:"adapterType"`
	AdapterConfig      json.RawMessage          `json:"adapterConfig"`
	Permissions        *domain.AgentPermissions `json:"permissions"`
	BudgetMonthlyCents *int64                   `json:"budgetMonthlyCents"`
	SpentMonthlyCents  *int64                   `json:"spentMonthlyCents"`
	EnvironmentID      *string                  `json:"environmentId"`
}

// applyAgentInput validates in and writes it onto a (create when isNew).
// admin is whether the actor is an instance administrator, role the
// actor's role in the agent's company. The returned adapter write, if any,
// must be stored once the agent row exists.
func (s *Server) applyAgentInput(ctx context.Context, q db.Querier, a *domain.Agent, in agentInput, isNew, admin bool, role string) (*adapterWrite, error) {
	var w *adapterWrite
	if in.Name != nil || isNew {
		name, err := validName("name", deref(in.Name), 200)
		if err != nil {
			return nil, err
		}
		a.Name = name
	}
	if in.Status != nil {
		if !slices.Contains([]string{domain.AgentActive, domain.AgentPaused, domain.AgentTerminated, domain.AgentPendingApproval}, *in.Status) {
			return nil, httpx.Errorf(http.StatusBadRequest, "status must be active, paused, terminated or pending_approval")
		}
		if a.Status == domain.AgentTerminated && *in.Status != domain.AgentTerminated {
			return nil, httpx.Errorf(http.StatusConflict, "a terminated agent cannot be reactivated")
		}
		a.Status = *in.Status
	}
	if in.AdapterType != nil || in.AdapterConfig != nil || isNew {
		typ := a.AdapterType
		if in.AdapterType != nil {
			typ = *in.AdapterType
		}
		raw := in.AdapterConfig
		if raw == nil {
			// A new type alone re-validates the stored config, masked:
			// its write-only values are kept, not re-read.
			raw = domain.MaskAdapterConfig(a.AdapterConfig)
		}
		var err error
		if w, err = s.applyAdapter(ctx, a, typ, raw, admin, isNew); err != nil {
			return nil, err
		}
	}
	if in.Permissions != nil {
		if err := s.validatePermissions(ctx, q, a.CompanyID, in.Permissions); err != nil {
			return nil, err
		}
		a.Permissions = *in.Permissions
	}
	// Budgets are the owners' and admins' spending decisions: a member
	// may send the stored values back (a client round-tripping an agent)
	// but not change them, or an agent out of budget would be refilled by
	// whoever it works for.
	budgetRole := role == domain.RoleOwner || role == domain.RoleAdmin
	if in.BudgetMonthlyCents != nil && *in.BudgetMonthlyCents != a.BudgetMonthlyCents {
		if *in.BudgetMonthlyCents < 0 {
			return nil, httpx.Errorf(http.StatusBadRequest, "budgetMonthlyCents must be zero (unlimited) or positive")
		}
		if !budgetRole {
			return nil, httpx.Errorf(http.StatusForbidden, "only a company owner or admin may change budgetMonthlyCents")
		}
		a.BudgetMonthlyCents = *in.BudgetMonthlyCents
	}
	if in.SpentMonthlyCents != nil && *in.SpentMonthlyCents != a.SpentMonthlyCents {
		// Spend is counted by the runs; the only write is a reset to 0
		// by an owner or admin, which the caller audits.
		if *in.SpentMonthlyCents != 0 {
			return nil, httpx.Errorf(http.StatusBadRequest, "spentMonthlyCents is counted by runs: it can only be reset to 0")
		}
		if !budgetRole {
			return nil, httpx.Errorf(http.StatusForbidden, "only a company owner or admin may reset spentMonthlyCents")
		}
		a.SpentMonthlyCents = 0
		a.SpendPeriod = s.Store.Now().Format("2006-01")
	}
	if in.EnvironmentID != nil {
		if err := s.checkEnvironment(ctx, q, a.CompanyID, *in.EnvironmentID); err != nil {
			return nil, err
		}
		a.EnvironmentID = *in.EnvironmentID
	}
	if in.AdapterType != nil || in.AdapterConfig != nil || in.EnvironmentID != nil || isNew {
		if err := s.checkSandboxPlacement(ctx, q, *a); err != nil {
			return nil, err
		}
	}
	return w, nil
}

// checkSandboxPlacement refuses, when it is saved, a process agent in a
// sandbox environment whose program lives where no sandbox can run it
// (inside or above the Paperclip home): every run would fail at start,
// and mail woken for it would go unanswered.
func (s *Server) checkSandboxPlacement(ctx context.Context, q db.Querier, a domain.Agent) error {
	if a.AdapterType != "process" || a.EnvironmentID == "" {
		return nil
	}
	env, err := s.Store.GetEnvironment(ctx, q, a.EnvironmentID)
	if err != nil || env.Driver != "sandbox" {
		return nil
	}
	var cfg domain.ProcessAdapterConfig
	if json.Unmarshal(a.AdapterConfig, &cfg) != nil {
		return nil
	}
	if err := sandbox.CheckPlacement(cfg.Command, s.Config.SandboxHidden(), s.Config.WorkspacesDir()); err != nil {
		return httpx.Errorf(http.StatusBadRequest, "adapterConfig.command: %s", strings.TrimPrefix(err.Error(), "sandbox: "))
	}
	return nil
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func (s *Server) createAgent(w http.ResponseWriter, r *http.Request) error {
	a, companyID, acc, err := s.boardCompany(r, true)
	if err != nil {
		return err
	}
	if err := authz.RequireRole(acc, domain.RoleOwner, domain.RoleAdmin, domain.RoleMember); err != nil {
		return err
	}
	var in agentInput
	if err := s.decodeJSON(w, r, &in); err != nil {
		return err
	}
	if in.AdapterType == nil {
		return httpx.Errorf(http.StatusBadRequest, "adapterType is required (process, http, claude_local or codex_local)")
	}
	agent := domain.Agent{CompanyID: companyID, Status: domain.AgentActive, Permissions: domain.AgentPermissions{TrustPreset: domain.TrustStandard}}
	err = s.Store.Tx(r.Context(), func(tx *sql.Tx) error {
		w, err := s.applyAgentInput(r.Context(), tx, &agent, in, true, authz.RequireInstanceAdmin(a) == nil, acc.Role)
		if err != nil {
			return err
		}
		if err := s.Store.CreateAgent(r.Context(), tx, &agent); err != nil {
			return err
		}
		if err := s.storeAdapterSecrets(r.Context(), tx, agent, w); err != nil {
			return err
		}
		return s.Audit(r.Context(), tx, a, companyID, "agent.created", "agent", agent.ID, map[string]string{"name": agent.Name})
	})
	return httpx.Respond(w, http.StatusCreated, agent, err)
}

// loadAgent reads the path's agent and checks company access.
func (s *Server) loadAgent(r *http.Request, q db.Querier, write bool) (domain.Agent, authz.Access, error) {
	id, err := httpx.PathID(r, "agentId")
	if err != nil {
		return domain.Agent{}, authz.Access{}, err
	}
	agent, err := s.Store.GetAgent(r.Context(), q, id)
	if err != nil {
		return agent, authz.Access{}, err
	}
	acc, err := s.Authz.CompanyAccess(r.Context(), q, httpx.Actor(r), agent.CompanyID, write)
	return agent, acc, err
}

func (s *Server) getAgent(w http.ResponseWriter, r *http.Request) error {
	agent, _, err := s.loadAgent(r, s.Store.DB, false)
	return httpx.Respond(w, http.StatusOK, agent, err)
}

func (s *Server) patchAgent(w http.ResponseWriter, r *http.Request) error {
	a := httpx.Actor(r)
	if err := authz.RequireBoard(a); err != nil {
		return err
	}
	var in agentInput
	if err := s.decodeJSON(w, r, &in); err != nil {
		return err
	}
	var agent domain.Agent
	var interrupt []string
	err := s.Store.Tx(r.Context(), func(tx *sql.Tx) error {
		var acc authz.Access
		var err error
		if agent, acc, err = s.loadAgent(r, tx, true); err != nil {
			return err
		}
		if err := authz.RequireRole(acc, domain.RoleOwner, domain.RoleAdmin, domain.RoleMember); err != nil {
			return err
		}
		before, spentBefore := agent.Status, agent.SpentMonthlyCents
		aw, err := s.applyAgentInput(r.Context(), tx, &agent, in, false, authz.RequireInstanceAdmin(a) == nil, acc.Role)
		if err != nil {
			return err
		}
		if agent.SpentMonthlyCents != spentBefore {
			if err := s.Audit(r.Context(), tx, a, agent.CompanyID, "agent.spend_reset", "agent", agent.ID,
				map[string]any{"previousSpentMonthlyCents": spentBefore, "budgetMonthlyCents": agent.BudgetMonthlyCents}); err != nil {
				return err
			}
		}
		if err := s.Store.UpdateAgent(r.Context(), tx, &agent); err != nil {
			return err
		}
		if err := s.storeAdapterSecrets(r.Context(), tx, agent, aw); err != nil {
			return err
		}
		if agent.Status != before && (agent.Status == domain.AgentPaused || agent.Status == domain.AgentTerminated) {
			// A paused or terminated agent keeps nothing running: its
			// runs lose their tokens with this commit and their processes
			// are stopped right after it.
			if interrupt, err = s.Heartbeat.CancelAgentRunsTx(r.Context(), tx, agent.ID, "agent "+agent.Status, a.AuditActor()); err != nil {
				return err
			}
		}
		return s.Audit(r.Context(), tx, a, agent.CompanyID, "agent.updated", "agent", agent.ID,
			map[string]any{"status": agent.Status, "hostExecutionApproved": agent.HostExecutionApproved})
	})
	if err != nil {
		return err
	}
	s.Heartbeat.Interrupt(r.Context(), interrupt...)
	httpx.WriteJSON(w, http.StatusOK, agent)
	return nil
}

func (s *Server) wakeup(w http.ResponseWriter, r *http.Request) error {
	a := httpx.Actor(r)
	if err := authz.RequireBoard(a); err != nil {
		return err
	}
	var body struct {
		Reason         string          `json:"reason"`
		IssueID        string          `json:"issueId"`
		IdempotencyKey string          `json:"idempotencyKey"`
		Payload        json.RawMessage `json:"payload"`
		CommentID      string          `json:"commentId"`
	}
	if err := s.decodeJSON(w, r, &body); err != nil {
		return err
	}
	reason, err := validName("reason", body.Reason, 200)
	if err != nil {
		return err
	}
	if len(body.IdempotencyKey) > 255 {
		return httpx.Errorf(http.StatusBadRequest, "idempotencyKey must be at most 255 characters")
	}
	agent, _, err := s.loadAgent(r, s.Store.DB, true)
	if err != nil {
		return err
	}
	if body.IssueID != "" {
		// The task's UUID or its identifier in the agent's company.
		if body.IssueID, err = s.bodyIssueRef(r.Context(), s.Store.DB, agent.CompanyID, "issueId", body.IssueID); err != nil {
			return err
		}
		is, err := s.Store.GetIssue(r.Context(), s.Store.DB, body.IssueID)
		if err != nil || is.CompanyID != agent.CompanyID {
			return httpx.Errorf(http.StatusBadRequest, "issueId: task not found in the agent's company")
		}
	}
	if err := s.checkWakeComment(r, body.CommentID, body.IssueID); err != nil {
		return err
	}
	run, _, err := s.Heartbeat.Wakeup(r.Context(), agent.ID, heartbeat.WakeRequest{Source: "api", Reason: reason,
		IdempotencyKey: body.IdempotencyKey, IssueID: body.IssueID, CommentID: body.CommentID, Payload: body.Payload,
		RequestedByKind: a.Kind, RequestedByID: a.ID()})
	return httpx.Respond(w, http.StatusAccepted, run, err)
}

func (s *Server) createProject(w http.ResponseWriter, r *http.Request) error {
	a, companyID, _, err := s.boardCompany(r, true)
	if err != nil {
		return err
	}
	var body struct {
		Name      string                   `json:"name"`
		Workspace *domain.ProjectWorkspace `json:"workspace"`
	}
	if err := s.decodeJSON(w, r, &body); err != nil {
		return err
	}
	name, err := validName("name", body.Name, 200)
	if err != nil {
		return err
	}
	if ws := body.Workspace; ws != nil {
		switch ws.Strategy {
		case "git_worktree", "local_path":
		default:
			return httpx.Errorf(http.StatusBadRequest, "workspace.strategy must be git_worktree or local_path")
		}
		// A project path points runs at a host directory: an instance
		// administrator's decision, and never into the Paperclip home.
		if err := authz.RequireInstanceAdmin(a); err != nil {
			return httpx.Errorf(http.StatusForbidden, "only an instance administrator may give a project a workspace path")
		}
		if !filepath.IsAbs(ws.Path) {
			return httpx.Errorf(http.StatusBadRequest, "workspace.path must be an absolute path")
		}
		ws.Path = filepath.Clean(ws.Path)
		for _, g := range []string{s.cfg.Home, s.cfg.WorkspacesDir(), filepath.Dir(s.cfg.MasterKeyFile)} {
			if g != "" && (sandbox.Within(ws.Path, filepath.Clean(g)) || sandbox.Within(filepath.Clean(g), ws.Path)) {
				return httpx.Errorf(http.StatusBadRequest, "workspace.path must lie outside the Paperclip home (%s) and must not contain it", s.cfg.Home)
			}
		}
	}
	p := domain.Project{CompanyID: companyID, Name: name, Workspace: body.Workspace}
	err = s.Store.Tx(r.Context(), func(tx *sql.Tx) error {
		if err := s.Store.CreateProject(r.Context(), tx, &p); err != nil {
			return err
		}
		return s.Audit(r.Context(), tx, a, companyID, "project.created", "project", p.ID, map[string]string{"name": name})
	})
	return httpx.Respond(w, http.StatusCreated, p, err)
}

func (s *Server) createEnvironment(w http.ResponseWriter, r *http.Request) error {
	a, companyID, _, err := s.boardCompany(r, true)
	if err != nil {
		return err
	}
	var body struct {
		Name     string `json:"name"`
		Driver   string `json:"driver"`
		Provider string `json:"provider"`
		Status   string `json:"status"`
		// AllowNetwork: see patchEnvironment.
		AllowNetwork bool `json:"allowNetwork"`
	}
	if err := s.decodeJSON(w, r, &body); err != nil {
		return err
	}
	if err := checkAllowNetwork(a, body.Driver, body.AllowNetwork); err != nil {
		return err
	}
	name, err := validName("name", body.Name, 200)
	if err != nil {
		return err
	}
	if body.Driver != "local" && body.Driver != "sandbox" {
		return httpx.Errorf(http.StatusBadRequest, "driver must be local or sandbox")
	}
	if body.Driver == "sandbox" && body.Provider == "" {
		body.Provider = "bubblewrap"
	}
	if body.Provider != "" && body.Provider != "bubblewrap" {
		return httpx.Errorf(http.StatusBadRequest, "provider must be bubblewrap")
	}
	if body.Status != "" && !slices.Contains([]string{"active", "inactive", "error"}, body.Status) {
		return httpx.Errorf(http.StatusBadRequest, "status must be active, inactive or error")
	}
	e := domain.Environment{CompanyID: companyID, Name: name, Driver: body.Driver, Provider: body.Provider, Status: body.Status,
		AllowNetwork: body.AllowNetwork}
	err = s.Store.Tx(r.Context(), func(tx *sql.Tx) error {
		if err := s.Store.CreateEnvironment(r.Context(), tx, &e); err != nil {
			return err
		}
		return s.Audit(r.Context(), tx, a, companyID, "environment.created", "environment", e.ID, map[string]string{"driver": e.Driver})
	})
	return httpx.Respond(w, http.StatusCreated, e, err)
}
