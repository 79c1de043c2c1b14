package store_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/store"
)

func TestIssueIdempotencyKeyIsUniquePerCompany(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		ctx := context.Background()
		st := store.New(d)
		c1, _ := st.CreateCompany(ctx, d, "One", "")
		c2, _ := st.CreateCompany(ctx, d, "Two", "")
		first := domain.Issue{CompanyID: c1.ID, Title: "a", IdempotencyKey: "email:e1:t1"}
		if created, err := st.CreateIssue(ctx, d, &first); err != nil || !created {
			t.Fatalf("first: %v %v", created, err)
		}
		again := domain.Issue{CompanyID: c1.ID, Title: "b", IdempotencyKey: "email:e1:t1"}
		if created, err := st.CreateIssue(ctx, d, &again); err != nil || created || again.ID != first.ID || again.Title != "a" {
			t.Fatalf("replay must return the first task: created=%v err=%v id=%s title=%s", created, err, again.ID, again.Title)
		}
		other := domain.Issue{CompanyID: c2.ID, Title: "c", IdempotencyKey: "email:e1:t1"}
		if created, err := st.CreateIssue(ctx, d, &other); err != nil || !created {
			t.Fatalf("same key in another company is another task: %v %v", created, err)
		}
		for range 2 {
			plain := domain.Issue{CompanyID: c1.ID, Title: "no key"}
			if created, err := st.CreateIssue(ctx, d, &plain); err != nil || !created {
				t.Fatalf("tasks without a key never collide: %v %v", created, err)
			}
		}
	})
}

func TestRunIdempotencyAndTokenLifecycle(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		ctx := context.Background()
		st := store.New(d)
		c, a := companyWithAgent(t, st, d)
		r1 := domain.Run{CompanyID: c.ID, AgentID: a.ID, Status: domain.RunQueued, IdempotencyKey: "k"}
		if created, err := st.InsertRun(ctx, d, &r1); err != nil || !created {
			t.Fatal(err)
		}
		r2 := domain.Run{CompanyID: c.ID, AgentID: a.ID, Status: domain.RunQueued, IdempotencyKey: "k"}
		if created, err := st.InsertRun(ctx, d, &r2); err != nil || created || r2.ID != r1.ID {
			t.Fatalf("duplicate key: created=%v id=%s want %s err=%v", created, r2.ID, r1.ID, err)
		}
		hash := store.HashToken("pcr_token")
		if ok, err := st.StartRun(ctx, d, r1.ID, "runner-1", hash, st.Now().Add(60e9)); err != nil || !ok {
			t.Fatalf("start: %v %v", ok, err)
		}
		if ok, _ := st.StartRun(ctx, d, r1.ID, "runner-2", hash, st.Now()); ok {
			t.Fatal("a running run cannot be claimed twice")
		}
		if got, err := st.RunByTokenHash(ctx, d, hash); err != nil || got.ID != r1.ID {
			t.Fatalf("token of a running run: %v", err)
		}
		if ok, _ := st.FinishRun(ctx, d, r1.ID, "runner-2", domain.RunSucceeded, nil, ""); ok {
			t.Fatal("another runner cannot finish the run")
		}
		if ok, err := st.FinishRun(ctx, d, r1.ID, "runner-1", domain.RunSucceeded, nil, ""); err != nil || !ok {
			t.Fatalf("finish: %v %v", ok, err)
		}
		if _, err := st.RunByTokenHash(ctx, d, hash); err == nil {
			t.Fatal("a finished run's token must not authenticate")
		}
	})
}

func TestInsertRunAuditedWritesEntriesOnlyWithANewRun(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		ctx := context.Background()
		st := store.New(d)
		c, a := companyWithAgent(t, st, d)
		entries := func(run domain.Run) ([]*domain.Activity, error) {
			var out []*domain.Activity
			for _, action := range []string{"test.one", "test.two"} {
				e, err := store.AuditEntry(domain.ActivityActor{Kind: "system"}, c.ID, action, "heartbeat_run", run.ID,
					map[string]any{"runId": run.ID})
				if err != nil {
					return nil, err
				}
				out = append(out, e)
			}
			return out, nil
		}
		guard := &domain.IssueStateGuard{}
		r1 := domain.Run{CompanyID: c.ID, AgentID: a.ID, Status: domain.RunRefused, RefusalReason: "agent_paused",
			IdempotencyKey: "k", Payload: []byte(`{"x":1}`), IssueStateGuard: guard}
		if created, err := st.InsertRunAudited(ctx, d, &r1, entries); err != nil || !created {
			t.Fatalf("first: created=%v err=%v", created, err)
		}
		got, err := st.GetRun(ctx, d, r1.ID)
		if err != nil || got.Status != domain.RunRefused || got.FinishedAt == nil || got.RefusalReason != "agent_paused" {
			t.Fatalf("stored run: %+v %v", got, err)
		}
		r2 := domain.Run{CompanyID: c.ID, AgentID: a.ID, Status: domain.RunQueued, IdempotencyKey: "k"}
		created, err := st.InsertRunAudited(ctx, d, &r2, entries)
		if err != nil || created || r2.ID != r1.ID || r2.Status != domain.RunRefused {
			t.Fatalf("repeated key: created=%v id=%s want %s status=%s err=%v", created, r2.ID, r1.ID, r2.Status, err)
		}
		acts, err := st.ListActivity(ctx, d, c.ID, 10)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, e := range acts {
			if e.EntityType == "heartbeat_run" {
				n++
				if e.EntityID != r1.ID || string(e.Details) == "" {
					t.Fatalf("entry of another run: %+v", e)
				}
			}
		}
		if n != 2 {
			t.Fatalf("want the first run's 2 entries only, got %d", n)
		}
	})
}

// The wake's joined read returns what the two separate reads return, and
// a missing agent or task is a not-found error naming it.
func TestAgentSharedWithIssueMatchesTheSeparateReads(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		ctx := context.Background()
		st := store.New(d)
		c, a := companyWithAgent(t, st, d)
		i := domain.Issue{CompanyID: c.ID, Title: "task", Status: domain.IssueTodo, Priority: "medium", AssigneeAgentID: a.ID,
			IdempotencyKey: "k"}
		if _, err := st.CreateIssue(ctx, d, &i); err != nil {
			t.Fatal(err)
		}
		read := func(agentID, issueID string) (domain.Agent, domain.Issue, error) {
			tx, err := d.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx.Rollback() }()
			return st.AgentSharedWithIssue(ctx, tx, agentID, issueID)
		}
		gotA, gotI, err := read(a.ID, i.ID)
		if err != nil {
			t.Fatal(err)
		}
		wantA, _ := st.GetAgent(ctx, d, a.ID)
		wantI, _ := st.GetIssue(ctx, d, i.ID)
		if fmt.Sprint(gotA) != fmt.Sprint(wantA) || fmt.Sprint(gotI) != fmt.Sprint(wantI) {
			t.Fatalf("joined read:\n%+v\n%+v\nwant\n%+v\n%+v", gotA, gotI, wantA, wantI)
		}
		var nf *store.NotFoundError
		if _, _, err := read(a.ID, "missing"); !errors.As(err, &nf) || !strings.Contains(err.Error(), "issue") {
			t.Fatalf("missing issue: %v", err)
		}
		if _, _, err := read("missing", i.ID); !errors.As(err, &nf) || !strings.Contains(err.Error(), "agent") {
			t.Fatalf("missing agent: %v", err)
		}
	})
}

// companyWithAgent creates a company "C" with one process agent "a".
func companyWithAgent(t *testing.T, st *store.Store, d *db.DB) (domain.Company, domain.Agent) {
	t.Helper()
	ctx := context.Background()
	c, err := st.CreateCompany(ctx, d, "C", "")
	if err != nil {
		t.Fatal(err)
	}
	a := domain.Agent{CompanyID: c.ID, Name: "a", AdapterType: "process"}
	if err := st.CreateAgent(ctx, d, &a); err != nil {
		t.Fatal(err)
	}
	return c, a
}

func TestTimesRoundTripInUTC(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		ctx := context.Background()
		st := store.New(d)
		c, err := st.CreateCompany(ctx, d, "Clock", "")
		if err != nil {
			t.Fatal(err)
		}
		got, err := st.GetCompany(ctx, d, c.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !got.CreatedAt.Equal(c.CreatedAt) || got.CreatedAt.Location().String() != "UTC" {
			t.Fatalf("created_at %v (%v) != %v", got.CreatedAt, got.CreatedAt.Location(), c.CreatedAt)
		}
	})
}
