package heartbeat_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/heartbeat"
	"github.com/paperclipai/paperclipai/internal/store"
)

type env struct {
	st      *store.Store
	svc     *heartbeat.Service
	company string
}

func newEnv(t *testing.T, d *db.DB) *env {
	t.Helper()
	return startEnv(t, d, "HB", heartbeat.Options{WorkspacesDir: t.TempDir(), RunsDir: t.TempDir()})
}

// startEnv starts a heartbeat service with the test runner, adapters and
// lease on opts (which sets the directories), stops it when the test
// ends, and creates a company named name.
func startEnv(t *testing.T, d *db.DB, name string, opts heartbeat.Options) *env {
	t.Helper()
	return startEnvAdapters(t, d, name, opts, nil)
}

// startEnvAdapters is startEnv with further adapters by type.
func startEnvAdapters(t *testing.T, d *db.DB, name string, opts heartbeat.Options, extra map[string]heartbeat.Adapter) *env {
	t.Helper()
	st := store.New(d)
	opts.Store, opts.RunnerID, opts.APIURL = st, "test-runner", "http://127.0.0.1:1/api"
	opts.Adapters = map[string]heartbeat.Adapter{"process": heartbeat.ProcessAdapter{KillGrace: time.Second}, "http": heartbeat.HTTPAdapter{}}
	for k, a := range extra {
		opts.Adapters[k] = a
	}
	opts.LeaseTTL, opts.ExclusiveDatabase = 3*time.Second, true
	svc := heartbeat.New(opts)
	ctx, cancel := context.WithCancel(context.Background())
	if err := svc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, c := context.WithTimeout(context.Background(), 10*time.Second)
		defer c()
		_ = svc.Shutdown(sctx)
		cancel()
	})
	c, err := st.CreateCompany(context.Background(), d, name, "")
	if err != nil {
		t.Fatal(err)
	}
	return &env{st: st, svc: svc, company: c.ID}
}

func (e *env) agent(t *testing.T, typ string, cfg any) domain.Agent {
	t.Helper()
	raw, _ := json.Marshal(cfg)
	// Written by the instance administrator: may run on the host.
	a := domain.Agent{CompanyID: e.company, Name: "a", AdapterType: typ, AdapterConfig: raw, HostExecutionApproved: true}
	if err := e.st.CreateAgent(context.Background(), e.st.DB, &a); err != nil {
		t.Fatal(err)
	}
	return a
}

func (e *env) wait(t *testing.T, id string) domain.Run {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		r, err := e.st.GetRun(context.Background(), e.st.DB, id)
		if err != nil {
			t.Fatal(err)
		}
		if r.Terminal() {
			return r
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("run %s did not finish", id)
	return domain.Run{}
}

func TestIssueStateGuardAndCoalescing(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		e := newEnv(t, d)
		ctx := context.Background()
		a := e.agent(t, "process", map[string]any{"command": "/bin/sleep", "args": []string{"1"}})
		issue := domain.Issue{CompanyID: e.company, Title: "t", AssigneeAgentID: a.ID, Status: domain.IssueDone}
		if _, err := e.st.CreateIssue(ctx, d, &issue); err != nil {
			t.Fatal(err)
		}
		guard := &domain.IssueStateGuard{IssueID: issue.ID, Statuses: []string{domain.IssueTodo}, RequireAssignment: true}
		r, _, err := e.svc.Wakeup(ctx, a.ID, heartbeat.WakeRequest{Reason: "email_received", IssueID: issue.ID, IssueStateGuard: guard})
		if err != nil || r.Status != domain.RunRefused || r.RefusalReason != heartbeat.RefusedIssueState {
			t.Fatalf("guard on a done task: %+v %v", r, err)
		}
		issue.Status = domain.IssueTodo
		if err := e.st.UpdateIssue(ctx, d, &issue); err != nil {
			t.Fatal(err)
		}
		// First wake runs (sleep 1); two more coalesce into one queued run.
		first, _, _ := e.svc.Wakeup(ctx, a.ID, heartbeat.WakeRequest{Reason: "x", IssueID: issue.ID, IssueStateGuard: guard})
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			if r, _ := e.st.GetRun(ctx, d, first.ID); r.Status == domain.RunRunning {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		q1, created1, _ := e.svc.Wakeup(ctx, a.ID, heartbeat.WakeRequest{Reason: "x", IssueID: issue.ID, AllowRunCoalescing: true})
		q2, created2, _ := e.svc.Wakeup(ctx, a.ID, heartbeat.WakeRequest{Reason: "x", IssueID: issue.ID, AllowRunCoalescing: true})
		if !created1 || created2 || q1.ID != q2.ID {
			t.Fatalf("coalescing: %v %v %s %s", created1, created2, q1.ID, q2.ID)
		}
		if e.wait(t, first.ID).Status != domain.RunSucceeded || e.wait(t, q1.ID).Status != domain.RunSucceeded {
			t.Fatal("runs did not succeed")
		}
	})
}

func TestTimeoutAndAdapters(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		e := newEnv(t, d)
		ctx := context.Background()
		slow := e.agent(t, "process", map[string]any{"command": "/bin/sleep", "args": []string{"30"}, "timeoutSec": 1})
		r, _, _ := e.svc.Wakeup(ctx, slow.ID, heartbeat.WakeRequest{Reason: "slow"})
		if got := e.wait(t, r.ID); got.Status != domain.RunTimedOut {
			t.Fatalf("timeout: %+v", got)
		}
		fail := e.agent(t, "process", map[string]any{"command": "/bin/sh", "args": []string{"-c", "echo boom >&2; exit 3"}})
		r, _, _ = e.svc.Wakeup(ctx, fail.ID, heartbeat.WakeRequest{Reason: "fail"})
		got := e.wait(t, r.ID)
		if got.Status != domain.RunFailed || got.ExitCode == nil || *got.ExitCode != 3 {
			t.Fatalf("failing process: %+v", got)
		}
		if log, _, _, _ := e.st.GetRunLog(ctx, d, r.ID); log != "boom\n" {
			t.Fatalf("captured output %q", log)
		}
		// The http adapter POSTs the run and treats 2xx as success.
		var body map[string]string
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			_ = json.Unmarshal(b, &body)
			w.WriteHeader(http.StatusAccepted)
		}))
		defer srv.Close()
		h := e.agent(t, "http", map[string]any{"url": srv.URL})
		r, _, _ = e.svc.Wakeup(ctx, h.ID, heartbeat.WakeRequest{Reason: "hook"})
		if got := e.wait(t, r.ID); got.Status != domain.RunSucceeded || body["runId"] != r.ID || body["wakeReason"] != "hook" || body["apiKey"] == "" {
			t.Fatalf("http adapter: %+v %v", got, body)
		}
	})
}

// Wakes that do not coalesce share the agent's row lock: on PostgreSQL a
// second wake of the agent goes on while a first is uncommitted, but a
// change of the agent (a pause) waits for it, so a wake never commits a
// queued run for an agent paused after the wake read it. A repeated
// idempotency key returns the earlier run on both databases.
func TestWakesShareTheAgentLock(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		e := newEnv(t, d)
		ctx := context.Background()
		a := e.agent(t, "process", map[string]any{"command": "/bin/true"})
		setStatus := func(q db.Querier, status string) error {
			a.Status = status
			return e.st.UpdateAgent(ctx, q, &a)
		}
		if err := setStatus(d, domain.AgentPaused); err != nil {
			t.Fatal(err)
		}
		first, created, err := e.svc.Wakeup(ctx, a.ID, heartbeat.WakeRequest{Reason: "x", IdempotencyKey: "k1"})
		if err != nil || !created {
			t.Fatalf("first wake: %v %v", created, err)
		}
		// The caller's own audit entry is written for a repeat too, naming
		// the earlier run.
		also := func(run domain.Run) (*domain.Activity, error) {
			return store.AuditEntry(domain.ActivityActor{Kind: "system", ID: "test"}, e.company, "test.also", "heartbeat_run", run.ID, nil)
		}
		again, created, err := e.svc.Wakeup(ctx, a.ID, heartbeat.WakeRequest{Reason: "x", IdempotencyKey: "k1", AlsoAudit: also})
		if err != nil || created || again.ID != first.ID {
			t.Fatalf("repeated key: %+v %v %v (first %s)", again, created, err, first.ID)
		}
		acts, err := e.st.ListActivity(ctx, d, e.company, 0)
		if err != nil {
			t.Fatal(err)
		}
		var wakes, alsos int
		for _, act := range acts {
			switch {
			case act.Action == "heartbeat.refused" && act.EntityID == first.ID:
				wakes++
			case act.Action == "test.also" && act.EntityID == first.ID:
				alsos++
			}
		}
		if wakes != 1 || alsos != 1 {
			t.Fatalf("audit entries: %d wake, %d caller's (want 1 and 1)", wakes, alsos)
		}
		if d.Dialect != db.Postgres {
			return // SQLite: one writer at a time, nothing to share
		}
		tx1, err := d.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx1.Rollback()
		if _, _, err := e.svc.WakeupTx(ctx, tx1, a.ID, heartbeat.WakeRequest{Reason: "x", IdempotencyKey: "k2"}); err != nil {
			t.Fatal(err)
		}
		// Why lock_timeout: tx1 holds its locks until it ends, so any
		// conflict with it fails at once instead of waiting.
		inTx := func(f func(tx *sql.Tx) error) error {
			tx, err := d.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			if _, err := tx.ExecContext(ctx, `SET LOCAL lock_timeout = '200ms'`); err != nil {
				t.Fatal(err)
			}
			if err := f(tx); err != nil {
				return err
			}
			return tx.Commit()
		}
		if err := inTx(func(tx *sql.Tx) error {
			_, _, err := e.svc.WakeupTx(ctx, tx, a.ID, heartbeat.WakeRequest{Reason: "x", IdempotencyKey: "k3"})
			return err
		}); err != nil {
			t.Fatalf("a second wake waited for the first: %v", err)
		}
		err = inTx(func(tx *sql.Tx) error { return setStatus(tx, domain.AgentActive) })
		if err == nil || !strings.Contains(err.Error(), "lock timeout") {
			t.Fatalf("a change of the agent did not wait for the open wake: %v", err)
		}
		if err := tx1.Commit(); err != nil {
			t.Fatal(err)
		}
	})
}
