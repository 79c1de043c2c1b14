package policy_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/paperclipai/paperclipai/internal/authz"
	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/policy"
	"github.com/paperclipai/paperclipai/internal/store"
)

func TestDecide(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		ctx := context.Background()
		st := store.New(d)
		svc := &policy.Service{Store: st}
		c, err := st.CreateCompany(ctx, d, "Policy Co", "")
		if err != nil {
			t.Fatal(err)
		}
		agentA := domain.Agent{CompanyID: c.ID, Name: "a", AdapterType: "process"}
		agentB := domain.Agent{CompanyID: c.ID, Name: "b", AdapterType: "process"}
		for _, a := range []*domain.Agent{&agentA, &agentB} {
			if err := st.CreateAgent(ctx, d, a); err != nil {
				t.Fatal(err)
			}
		}
		actA := authz.Actor{Kind: authz.KindAgent, Agent: &agentA}
		actB := authz.Actor{Kind: authz.KindAgent, Agent: &agentB}
		decide := func(a authz.Actor, action string) policy.Decision {
			t.Helper()
			var dec policy.Decision
			if err := st.Tx(ctx, func(tx *sql.Tx) error {
				var err error
				dec, err = svc.Decide(ctx, tx, c.ID, a, action)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			return dec
		}
		if dec := decide(actA, "email.send"); !dec.Allowed {
			t.Fatalf("default must allow: %+v", dec)
		}
		mustCreate := func(p domain.ActionPolicy) {
			p.CompanyID = c.ID
			if err := st.CreatePolicy(ctx, d, &p); err != nil {
				t.Fatal(err)
			}
		}
		mustCreate(domain.ActionPolicy{Action: "email.send", ActorKind: "agent", ActorID: agentB.ID, Effect: "deny", Reason: "B may not email"})
		mustCreate(domain.ActionPolicy{Action: "email.send", Effect: "allow", RateLimitCount: 2, RateLimitWindowSeconds: 3600})
		if dec := decide(actB, "email.send"); dec.Allowed || dec.Reason != "B may not email" {
			t.Fatalf("deny rule: %+v", dec)
		}
		for i := 1; i <= 2; i++ {
			if dec := decide(actA, "email.send"); !dec.Allowed {
				t.Fatalf("call %d under the limit refused: %+v", i, dec)
			}
		}
		dec := decide(actA, "email.send")
		if dec.Allowed || !dec.RateLimited || dec.RetryAfter <= 0 {
			t.Fatalf("third call within the window must be rate limited: %+v", dec)
		}
		if dec := decide(actA, "email.reply"); !dec.Allowed {
			t.Fatalf("other actions are unaffected: %+v", dec)
		}
		var audited int
		if err := d.QueryRowContext(ctx, `SELECT COUNT(*) FROM activity_log WHERE action = 'policy.decided'`).Scan(&audited); err != nil {
			t.Fatal(err)
		}
		if audited != 6 {
			t.Fatalf("every decision is audited: got %d entries, want 6", audited)
		}
	})
}
