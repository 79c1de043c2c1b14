package ui

import (
	"testing"

	"github.com/paperclipai/paperclipai/internal/domain"
)

// Every state the domain defines has a label (a new status must not show
// up as a raw code).
func TestLabelsCoverDomainStates(t *testing.T) {
	cases := map[string]struct {
		labels map[string]string
		values []string
	}{
		"task status": {taskStatusLabels, []string{domain.IssueBacklog, domain.IssueTodo, domain.IssueInProgress,
			domain.IssueInReview, domain.IssueBlocked, domain.IssueDone, domain.IssueCancelled}},
		"run status": {runStatusLabels, []string{domain.RunQueued, domain.RunRunning, domain.RunSucceeded, domain.RunFailed,
			domain.RunCancelled, domain.RunTimedOut, domain.RunRefused}},
		"refusal":      {refusalLabels, []string{"agent_paused", "agent_terminated", "agent_not_active", "budget_exceeded", "issue_state_changed", "issue_not_found"}},
		"agent status": {agentStatusLabels, []string{domain.AgentActive, domain.AgentPaused, domain.AgentTerminated, domain.AgentPendingApproval}},
		"trust":        {trustLabels, []string{domain.TrustStandard, domain.TrustLowTrustReview}},
		"role":         {roleLabels, []string{domain.RoleOwner, domain.RoleAdmin, domain.RoleMember, domain.RoleViewer}},
		"priority":     {priorityLabels, priorityOrder},
		"inbox status": {inboxStatusLabels, []string{domain.EndpointActive, domain.EndpointPaused, domain.EndpointDraft, domain.EndpointArchived}},
		"inbox health": {inboxHealthLabels, []string{domain.HealthOK, domain.HealthConnecting, domain.HealthAttention, domain.HealthPaused,
			domain.HealthSetupIncomplete, domain.HealthDisconnected}},
	}
	for name, c := range cases {
		for _, v := range c.values {
			if c.labels[v] == "" {
				t.Errorf("%s %q has no label", name, v)
			}
		}
	}
	for _, s := range taskStatusOrder {
		if taskStatusLabels[s] == "" || tones["task"][s] == "" {
			t.Errorf("task status %q lacks a label or tone", s)
		}
	}
	for s := range runStatusLabels {
		if tones["run"][s] == "" {
			t.Errorf("run status %q has no tone", s)
		}
	}
}
