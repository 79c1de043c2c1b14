package email

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/sandbox"
)

// The agent gates of a setup: what an agent must have (an available status,
// a trust boundary, isolation and a sandbox when low-trust) before any
// provider call is made.

// checkAgent applies the agent and low-trust setup gates (docs/email-setup.md, "6. Low-trust agents").
// Every unmet requirement is named in one error, so a setup is fixed in
// one pass; a single one keeps its own message. Details.missing lists
// their codes.
func (s *Service) checkAgent(ctx context.Context, q db.Querier, companyID, agentID string) (domain.Agent, error) {
	ag, err := s.Store.GetAgent(ctx, q, agentID)
	if err != nil || ag.CompanyID != companyID || ag.Status == domain.AgentTerminated || ag.Status == domain.AgentPendingApproval {
		return ag, domain.Refuse(domain.KindInvalid, "Select an available company agent")
	}
	var missing []requirement
	lowTrust := ag.Permissions.TrustPreset == domain.TrustLowTrustReview
	if lowTrust {
		if _, err := s.LowTrustPlacement(ctx, q, ag); err != nil {
			r, ok := domain.AsRefusal(err)
			if !ok || r.Kind != domain.KindInvalid {
				return ag, err
			}
			missing = append(missing, requirement{"trust_boundary", r.Message,
				"a project or root task boundary (permissions.authorizationPolicy.trustBoundary: projectIds or rootIssueId)"})
		}
		settings, err := s.Store.GetSettings(ctx, q)
		if err != nil {
			return ag, err
		}
		if !settings.Experimental.EnableIsolatedWorkspaces {
			missing = append(missing, requirement{"isolated_workspaces",
				"Low-trust email agents require isolated workspaces and a sandbox environment. Complete runtime setup before connecting this inbox.",
				"isolated workspaces (instance setting experimental.enableIsolatedWorkspaces)"})
		}
	}
	env, envErr := domain.Environment{}, error(nil)
	if ag.EnvironmentID != "" {
		env, envErr = s.Store.GetEnvironment(ctx, q, ag.EnvironmentID)
	}
	sandboxed := ag.EnvironmentID != "" && envErr == nil && env.CompanyID == companyID && env.Driver == "sandbox"
	if lowTrust && (!sandboxed || env.Status != "active") {
		missing = append(missing, requirement{"sandbox_environment",
			"Select an active sandbox environment for this low-trust email agent before connecting its inbox.",
			"an active sandbox environment (the agent's environmentId, an environment with driver sandbox)"})
	}
	if sandboxed && ag.AdapterType == "process" {
		var cfg domain.ProcessAdapterConfig
		if json.Unmarshal(ag.AdapterConfig, &cfg) == nil {
			if err := sandbox.CheckPlacement(cfg.Command, s.Config.SandboxHidden(), s.Config.WorkspacesDir()); err != nil {
				msg := strings.TrimPrefix(err.Error(), "sandbox: ")
				missing = append(missing, requirement{"sandbox_command", "The agent's runs would fail in its sandbox: " + msg, "a program the sandbox can run: " + msg})
			}
		}
	}
	return ag, requirementsError(missing)
}

// requirement is one unmet setup requirement: its code, its message when
// it is the only one, and its phrase in a list.
type requirement struct {
	code, alone, item string
}

// requirementsError names every unmet requirement (nil when none): the
// first with its own message, the others listed after it, so a client
// that shows the first message still gets the whole list.
func requirementsError(missing []requirement) error {
	if len(missing) == 0 {
		return nil
	}
	codes := make([]string, len(missing))
	items := make([]string, 0, len(missing)-1)
	for i, m := range missing {
		codes[i] = m.code
		if i > 0 {
			items = append(items, m.item)
		}
	}
	msg := missing[0].alone
	if len(items) > 0 {
		msg += " Also still needed: " + strings.Join(items, "; ") + "."
	}
	return &domain.Refusal{Kind: domain.KindInvalid, Code: "agent_not_ready", Message: msg,
		Details: map[string]any{"missing": codes}}
}

// Placement says where a low-trust agent's inbound tasks go.
type Placement struct {
	ParentID  string
	ProjectID string
}

// LowTrustPlacement resolves a low-trust agent's boundary into the parent
// task and project of new inbound tasks (root task first, then the first
// boundary project).
func (s *Service) LowTrustPlacement(ctx context.Context, q db.Querier, ag domain.Agent) (Placement, error) {
	b := ag.Permissions.Boundary()
	if b != nil && b.CompanyID != "" && b.CompanyID != ag.CompanyID {
		return Placement{}, domain.Refuse(domain.KindForbidden, "The agent's trust boundary belongs to another company")
	}
	if b != nil && b.RootIssueID != "" {
		if root, err := s.Store.GetIssue(ctx, q, b.RootIssueID); err == nil && root.CompanyID == ag.CompanyID {
			return Placement{ParentID: root.ID, ProjectID: root.ProjectID}, nil
		}
	}
	if b != nil && len(b.ProjectIDs) > 0 {
		if p, err := s.Store.GetProject(ctx, q, b.ProjectIDs[0]); err == nil && p.CompanyID == ag.CompanyID {
			return Placement{ProjectID: p.ID}, nil
		}
	}
	return Placement{}, domain.Refuse(domain.KindInvalid, "Configure a project or root task boundary for this low-trust email agent "+
		"(permissions.authorizationPolicy.trustBoundary: projectIds or rootIssueId)")
}
