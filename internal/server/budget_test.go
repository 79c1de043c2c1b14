package server_test

import (
	"testing"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
)

// Issue 28 item 8: a member refilled a budget-exhausted agent by setting
// spentMonthlyCents and budgetMonthlyCents to 0. Budgets are owner/admin
// settings; spend is written only by runs and by an audited reset to 0 by
// an owner or admin.
func TestBudgetsBelongToOwnersAndAdmins(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := setup(t, url)
		cid := e.company("Budget Co")
		aid := e.shellAgent(cid, "Spender", "true", map[string]any{"budgetMonthlyCents": 500})
		e.inst.SetSpend(t, aid, 500)
		member := e.member(cid, "member@example.com", "member")
		owner := e.member(cid, "owner@example.com", "owner")

		for _, body := range []map[string]any{
			{"spentMonthlyCents": 0, "budgetMonthlyCents": 0},
			{"spentMonthlyCents": 0},
			{"budgetMonthlyCents": 0},
			{"budgetMonthlyCents": 100000},
		} {
			if st, out := member.Do("PATCH", "/api/agents/"+aid, body); st != 403 {
				t.Fatalf("member PATCH %v: %d %s", body, st, out)
			}
		}
		a := e.board.JSON("GET", "/api/agents/"+aid, nil, 200)
		if a["spentMonthlyCents"] != float64(500) || a["budgetMonthlyCents"] != float64(500) {
			t.Fatalf("member changed the budget: %v %v", a["spentMonthlyCents"], a["budgetMonthlyCents"])
		}
		if run := member.JSON("POST", "/api/agents/"+aid+"/wakeup", map[string]any{"reason": "try"}, 202); run["refusalReason"] != "budget_exceeded" {
			t.Fatalf("member's wake of the exhausted agent: %v", run)
		}
		// Sending the stored values back (a round trip) is no change.
		member.JSON("PATCH", "/api/agents/"+aid, map[string]any{"name": "Spender 2", "spentMonthlyCents": 500, "budgetMonthlyCents": 500}, 200)
		if st, out := member.Do("POST", "/api/companies/"+cid+"/agents", map[string]any{"name": "Rich", "adapterType": "process",
			"adapterConfig": map[string]any{"command": "/bin/true"}, "budgetMonthlyCents": 700}); st != 403 {
			t.Fatalf("member creating an agent with a budget: %d %s", st, out)
		}
		// Spend is never set to a value, not even by an owner.
		if st, out := owner.Do("PATCH", "/api/agents/"+aid, map[string]any{"spentMonthlyCents": 7}); st != 400 {
			t.Fatalf("owner setting spend: %d %s", st, out)
		}
		// An owner's reset to 0 works and is audited.
		owner.JSON("PATCH", "/api/agents/"+aid, map[string]any{"spentMonthlyCents": 0, "budgetMonthlyCents": 800}, 200)
		a = e.board.JSON("GET", "/api/agents/"+aid, nil, 200)
		if a["spentMonthlyCents"] != float64(0) || a["budgetMonthlyCents"] != float64(800) {
			t.Fatalf("owner's reset: %v %v", a["spentMonthlyCents"], a["budgetMonthlyCents"])
		}
		found := false
		for _, ev := range e.board.List("/api/companies/" + cid + "/activity") {
			if ev["action"] == "agent.spend_reset" && ev["entityId"] == aid {
				found = true
			}
		}
		if !found {
			t.Fatal("the spend reset is not in the activity log")
		}
	})
}
