package heartbeat

import (
	"context"
	"errors"

	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/store"
)

// Refusal reasons of runs that may execute only in an active sandbox
// environment of the agent's company.
const (
	// RefusedLowTrustNoSandbox: every run of a low-trust agent.
	RefusedLowTrustNoSandbox = "low_trust_requires_sandbox_environment"
	// RefusedIsolatedNoSandbox: a run on a task whose execution settings
	// ask for an isolated workspace (inbound email of low-trust agents).
	RefusedIsolatedNoSandbox = "isolated_workspace_requires_sandbox_environment"
	// RefusedUnapprovedConfig: a host program configured by someone other
	// than an instance administrator.
	RefusedUnapprovedConfig = "unapproved_config_requires_sandbox_environment"
)

// RefusedSharedDirUnapproved fails a sandboxed run of an agent no instance
// administrator approved whose task's project works in a shared local_path
// directory: host runs work there too, so the sandbox must not write it.
const RefusedSharedDirUnapproved = "shared_workspace_requires_approved_agent"

// sandboxNeed returns why a run of agent (through adapter, on a task that
// is isolatedTask or not) must execute in a sandbox, or "" when it may run
// on the host. A low-trust agent, an isolated task and a host program whose
// configuration no instance administrator wrote all need one; an adapter
// that does not execute a host program (http) cannot be confined, so a run
// needing a sandbox is refused for it.
func sandboxNeed(agent domain.Agent, adapter Adapter, isolatedTask bool) string {
	switch {
	case agent.Permissions.TrustPreset == domain.TrustLowTrustReview:
		return RefusedLowTrustNoSandbox
	case isolatedTask:
		return RefusedIsolatedNoSandbox
	case executesHostProgram(adapter) && !agent.HostExecutionApproved:
		return RefusedUnapprovedConfig
	}
	return ""
}

// sandboxRefusal applies sandboxNeed at wake and at start: the run is
// refused unless it will execute in an active sandbox environment of the
// agent's company through an adapter that can be confined.
func (s *Service) sandboxRefusal(ctx context.Context, issues *issueReads, agent domain.Agent, issueID string) (string, error) {
	isolatedTask := false
	if issueID != "" {
		is, err := issues.get(ctx, issueID)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return "", err
		}
		isolatedTask = err == nil && isolated(is)
	}
	adapter := s.opts.Adapters[agent.AdapterType]
	need := sandboxNeed(agent, adapter, isolatedTask)
	if need == "" {
		return "", nil
	}
	if !executesHostProgram(adapter) || agent.EnvironmentID == "" {
		return need, nil
	}
	env, err := s.st.GetEnvironment(ctx, issues.q, agent.EnvironmentID)
	if errors.Is(err, store.ErrNotFound) {
		return need, nil
	}
	if err != nil {
		return "", err
	}
	if env.CompanyID != agent.CompanyID || env.Driver != envDriverSandbox || env.Status != envStatusActive {
		return need, nil
	}
	return "", nil
}
