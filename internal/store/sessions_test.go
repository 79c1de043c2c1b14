package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/store"
)

// Sessions are kept per (agent, task), replaced in place and forgotten on
// request; run usage lands on the run and charges the agent's budget to
// the micro-dollar, starting over each month.
func TestTaskSessionsAndRunUsage(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		ctx := context.Background()
		st := store.New(d)
		now := time.Date(2026, 3, 31, 23, 0, 0, 0, time.UTC)
		st.SetClock(func() time.Time { return now })
		c, _ := st.CreateCompany(ctx, d, "C", "")
		a := domain.Agent{CompanyID: c.ID, Name: "a", AdapterType: "claude_local"}
		if err := st.CreateAgent(ctx, d, &a); err != nil {
			t.Fatal(err)
		}
		is := domain.Issue{CompanyID: c.ID, Title: "t"}
		if _, err := st.CreateIssue(ctx, d, &is); err != nil {
			t.Fatal(err)
		}
		if _, err := st.GetTaskSession(ctx, d, a.ID, is.ID); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("no session yet: %v", err)
		}
		for _, sid := range []string{"s1", "s2"} {
			if err := st.PutTaskSession(ctx, d, store.TaskSession{AgentID: a.ID, IssueID: is.ID, AdapterType: "claude_local", SessionID: sid, Workdir: "/w"}); err != nil {
				t.Fatal(err)
			}
		}
		got, err := st.GetTaskSession(ctx, d, a.ID, is.ID)
		if err != nil || got.SessionID != "s2" || got.Workdir != "/w" || got.AdapterType != "claude_local" {
			t.Fatalf("session: %+v %v", got, err)
		}
		if err := st.DeleteTaskSession(ctx, d, a.ID, is.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := st.GetTaskSession(ctx, d, a.ID, is.ID); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("deleted session: %v", err)
		}
		run := func(cost int64) domain.Run {
			r := domain.Run{CompanyID: c.ID, AgentID: a.ID, IssueID: is.ID, Status: domain.RunQueued}
			if _, err := st.InsertRun(ctx, d, &r); err != nil {
				t.Fatal(err)
			}
			if err := st.RecordRunUsage(ctx, d, r, "s3", domain.RunUsage{InputTokens: 10, CachedInputTokens: 4, CacheCreationTokens: 3, OutputTokens: 2, CostMicros: cost}); err != nil {
				t.Fatal(err)
			}
			r, _ = st.GetRun(ctx, d, r.ID)
			return r
		}
		r := run(12300)
		if r.SessionID != "s3" || r.Usage == nil || r.Usage.CostMicros != 12300 || r.Usage.CostUSD != 0.0123 || r.Usage.OutputTokens != 2 {
			t.Fatalf("run usage: %+v %+v", r, r.Usage)
		}
		run(12300)
		run(7700) // 32300 micros: 3 cents, 2300 carried
		ag, _ := st.GetAgent(ctx, d, a.ID)
		if ag.SpentMonthlyCents != 3 || ag.SpendPeriod != "2026-03" {
			t.Fatalf("spend after three runs: %d cents in %s", ag.SpentMonthlyCents, ag.SpendPeriod)
		}
		now = now.Add(2 * time.Hour) // April
		run(9000)
		ag, _ = st.GetAgent(ctx, d, a.ID)
		if ag.SpentMonthlyCents != 0 || ag.SpendPeriod != "2026-04" {
			t.Fatalf("a new month starts over (9000 micros is under a cent): %d cents in %s", ag.SpentMonthlyCents, ag.SpendPeriod)
		}
		run(1000)
		ag, _ = st.GetAgent(ctx, d, a.ID)
		if ag.SpentMonthlyCents != 1 {
			t.Fatalf("the April remainder carries: %d cents", ag.SpentMonthlyCents)
		}
		plain := domain.Run{CompanyID: c.ID, AgentID: a.ID, Status: domain.RunQueued}
		_, _ = st.InsertRun(ctx, d, &plain)
		if p, _ := st.GetRun(ctx, d, plain.ID); p.Usage != nil || p.SessionID != "" {
			t.Fatalf("a run without usage reports none: %+v", p.Usage)
		}
	})
}
