package domain

import (
	"testing"
	"time"
)

func TestGrantsAllow(t *testing.T) {
	org := EmailGrant{Kind: GrantOrganization, Status: GrantActive}
	ann := EmailGrant{Kind: GrantUser, SubjectUserID: "ann", Status: GrantActive}
	annRevoked := EmailGrant{Kind: GrantUser, SubjectUserID: "ann", Status: GrantRevoked}
	orgRevoked := EmailGrant{Kind: GrantOrganization, Status: GrantRevoked}
	for _, tc := range []struct {
		name   string
		grants []EmailGrant
		user   string
		want   bool
	}{
		{"no grants", nil, "ann", false},
		{"the whole company", []EmailGrant{org}, "bob", true},
		{"the whole company, no user (an agent's use)", []EmailGrant{org}, "", true},
		{"one user, that user", []EmailGrant{ann}, "ann", true},
		{"one user, another user", []EmailGrant{ann}, "bob", false},
		{"one user, no user id never matches an empty subject", []EmailGrant{{Kind: GrantUser, Status: GrantActive}}, "", false},
		{"a revoked user grant", []EmailGrant{annRevoked}, "ann", false},
		{"a revoked company grant", []EmailGrant{orgRevoked}, "ann", false},
		{"revoked beside active", []EmailGrant{annRevoked, ann}, "ann", true},
		{"an unknown kind", []EmailGrant{{Kind: "everyone", Status: GrantActive}}, "ann", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := GrantsAllow(tc.grants, tc.user); got != tc.want {
				t.Errorf("GrantsAllow = %v, want %v", got, tc.want)
			}
		})
	}
	if AnyGrantActive([]EmailGrant{annRevoked, orgRevoked}) {
		t.Error("AnyGrantActive with only revoked grants")
	}
	if !AnyGrantActive([]EmailGrant{annRevoked, ann}) {
		t.Error("AnyGrantActive missed an active grant")
	}
}

func TestAgentOverBudget(t *testing.T) {
	now := time.Date(2026, 12, 4, 23, 30, 0, 0, time.FixedZone("UTC-2", -2*3600)) // 2026-12-05 01:30 UTC
	for _, tc := range []struct {
		name          string
		budget, spent int64
		period        string
		want          bool
	}{
		{"no budget never stops", 0, 1_000_000, "2026-12", false},
		{"under budget", 1000, 999, "2026-12", false},
		{"at budget", 1000, 1000, "2026-12", true},
		{"over budget", 1000, 5000, "2026-12", true},
		{"last month's spend does not count", 1000, 5000, "2026-11", false},
		{"the period is the UTC month", 1000, 1000, "2026-12", true},
		{"an empty period is no spend", 1000, 1000, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := Agent{BudgetMonthlyCents: tc.budget, SpentMonthlyCents: tc.spent, SpendPeriod: tc.period}
			if got := a.OverBudget(now); got != tc.want {
				t.Errorf("OverBudget = %v, want %v", got, tc.want)
			}
		})
	}
}
