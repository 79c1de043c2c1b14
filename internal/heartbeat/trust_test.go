package heartbeat_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/heartbeat"
	"github.com/paperclipai/paperclipai/internal/store"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

func mustRefuse(t *testing.T, r domain.Run, reason string) {
	t.Helper()
	if r.Status != domain.RunRefused || r.RefusalReason != reason {
		t.Fatalf("run %s (refusal %q, error %q), want refused with %q", r.Status, r.RefusalReason, r.Error, reason)
	}
}

// TestSandboxRequiredAtEveryRun: the sandbox requirement holds at every
// run, not only at setup. A low-trust agent whose environment is switched
// to local, or cleared, is refused with low_trust_requires_sandbox_environment;
// so is a task asking for an isolated workspace, and a host program whose
// configuration no instance administrator wrote — until it gets an active
// sandbox environment, where it runs confined (never as root). An http
// agent cannot be confined, so a low-trust one never runs.
func TestSandboxRequiredAtEveryRun(t *testing.T) {
	testkit.RequireBwrap(t)
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		e := newWSEnv(t, d)
		ctx := context.Background()
		sb, local := e.environment(t, "sandbox", "active"), e.environment(t, "local", "active")
		lowTrust := e.shAgent(t, sb, "echo uid:$(id -u)")
		task := e.task(t, lowTrust.ID, "")
		r, log := e.run(t, lowTrust.ID, task.ID)
		if r.Status != domain.RunSucceeded || !strings.Contains(log, "uid:") {
			t.Fatalf("low-trust run in its sandbox: %s %q %s", r.Status, r.Error, log)
		}
		if os.Geteuid() == 0 && strings.Contains(log, "uid:0\n") {
			t.Fatal("the sandboxed run ran as root")
		}
		for _, envID := range []string{local, ""} {
			lowTrust.EnvironmentID = envID
			if err := e.st.UpdateAgent(ctx, d, &lowTrust); err != nil {
				t.Fatal(err)
			}
			r, log = e.run(t, lowTrust.ID, task.ID)
			mustRefuse(t, r, heartbeat.RefusedLowTrustNoSandbox)
			if log != "" {
				t.Fatalf("the refused run ran: %q", log)
			}
		}

		// A standard, approved agent on an isolated (inbound email) task.
		standard := e.shAgent(t, "", "echo ran")
		mustRefuse(t, func() domain.Run { r, _ := e.run(t, standard.ID, e.task(t, standard.ID, "").ID); return r }(),
			heartbeat.RefusedIsolatedNoSandbox)

		// A process agent configured by a member: sandbox only.
		member := e.shAgent(t, "", "echo uid:$(id -u)")
		member.HostExecutionApproved = false
		if err := e.st.UpdateAgent(ctx, d, &member); err != nil {
			t.Fatal(err)
		}
		r, _ = e.run(t, member.ID, e.plainTask(t, member.ID, "").ID)
		mustRefuse(t, r, heartbeat.RefusedUnapprovedConfig)
		member.EnvironmentID = sb
		if err := e.st.UpdateAgent(ctx, d, &member); err != nil {
			t.Fatal(err)
		}
		r, log = e.run(t, member.ID, e.plainTask(t, member.ID, "").ID)
		if r.Status != domain.RunSucceeded || (os.Geteuid() == 0 && strings.Contains(log, "uid:0\n")) {
			t.Fatalf("member-configured agent in a sandbox: %s %q %s", r.Status, r.Error, log)
		}

		// An http agent cannot be sandboxed.
		raw, _ := json.Marshal(map[string]any{"url": "http://127.0.0.1:1/hook"})
		hook := domain.Agent{CompanyID: e.company, Name: "hook", AdapterType: "http", AdapterConfig: raw, EnvironmentID: sb,
			HostExecutionApproved: true, Permissions: domain.AgentPermissions{TrustPreset: domain.TrustLowTrustReview}}
		if err := e.st.CreateAgent(ctx, d, &hook); err != nil {
			t.Fatal(err)
		}
		r, _ = e.run(t, hook.ID, "")
		mustRefuse(t, r, heartbeat.RefusedLowTrustNoSandbox)
	})
}

// cancelScript records its token, then handles SIGTERM slowly (so the
// test can observe the token dying before the process does) or, with
// IGNORE_TERM, not at all (so SIGKILL must follow).
const cancelScript = `echo "$PAPERCLIP_API_KEY" > token
if [ -n "$IGNORE_TERM" ]; then trap '' TERM; else trap 'echo got TERM; sleep 1; exit 0' TERM; fi
echo started > started
i=0; while [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done`

// TestCancelRunningRuns: cancelling a running run (as pausing or
// terminating its agent does) kills its token with the commit, stops its
// process with SIGTERM and, after the grace period, SIGKILL, and records
// it cancelled with the reason. A cancellation committed through another
// replica reaches the replica executing the run.
func TestCancelRunningRuns(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		e := newWSEnv(t, d)
		ctx := context.Background()
		start := func(ignoreTerm bool) (domain.Run, string) {
			t.Helper()
			raw, _ := json.Marshal(map[string]any{"command": "/bin/sh", "args": []string{"-c", cancelScript}, "timeoutSec": 60,
				"env": map[string]string{"IGNORE_TERM": map[bool]string{true: "1"}[ignoreTerm]}})
			a := domain.Agent{CompanyID: e.company, Name: "a", AdapterType: "process", AdapterConfig: raw, HostExecutionApproved: true}
			if err := e.st.CreateAgent(ctx, d, &a); err != nil {
				t.Fatal(err)
			}
			task := e.plainTask(t, a.ID, "")
			r, _, err := e.svc.Wakeup(ctx, a.ID, heartbeat.WakeRequest{Reason: "test", IssueID: task.ID})
			if err != nil {
				t.Fatal(err)
			}
			dir := heartbeat.TaskDirectory(e.workspaces, e.company, task.ID, false)
			deadline := time.Now().Add(30 * time.Second)
			for {
				if _, err := os.Stat(filepath.Join(dir, "started")); err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the run never started")
				}
				time.Sleep(10 * time.Millisecond)
			}
			tok, _ := os.ReadFile(filepath.Join(dir, "token"))
			return r, strings.TrimSpace(string(tok))
		}
		cancel := func(svc *heartbeat.Service, r domain.Run, reason string) {
			t.Helper()
			r, err := e.st.GetRun(ctx, d, r.ID)
			if err != nil {
				t.Fatal(err)
			}
			if err := e.st.Tx(ctx, func(tx *sql.Tx) error {
				return svc.CancelRunTx(ctx, tx, r, reason, domain.ActivityActor{Kind: "board", ID: "tester"})
			}); err != nil {
				t.Fatal(err)
			}
			svc.Interrupt(ctx, r.ID)
		}

		r, token := start(false)
		if _, _, err := e.svc.AuthenticateToken(ctx, token); err != nil {
			t.Fatalf("the running run's token: %v", err)
		}
		cancel(e.svc, r, "agent paused")
		// The token is dead with the commit, while the process still
		// handles its SIGTERM.
		if _, _, err := e.svc.AuthenticateToken(ctx, token); err == nil {
			t.Fatal("a cancelled run's token still authenticates")
		}
		got := e.wait(t, r.ID)
		log, _, _, _ := e.st.GetRunLog(ctx, d, r.ID)
		if got.Status != domain.RunCancelled || got.Error != "run cancelled: agent paused" || !strings.Contains(log, "got TERM") ||
			got.CancelRequestedAt == nil || got.CancelReason != "agent paused" {
			t.Fatalf("cancelled run: %+v log %q", got, log)
		}
		if err := e.st.Tx(ctx, func(tx *sql.Tx) error {
			return e.svc.CancelRunTx(ctx, tx, got, "again", domain.ActivityActor{Kind: "board", ID: "tester"})
		}); err != heartbeat.ErrRunFinished {
			t.Fatalf("cancelling a finished run: %v", err)
		}

		// A process ignoring SIGTERM is killed after the grace period (1 s).
		r, _ = start(true)
		began := time.Now()
		cancel(e.svc, r, "agent terminated")
		got = e.wait(t, r.ID)
		if got.Status != domain.RunCancelled || time.Since(began) > 20*time.Second {
			t.Fatalf("SIGKILL after grace: %s after %s", got.Status, time.Since(began))
		}

		// Another replica (its own runner id) cancels a run executing here.
		other := heartbeat.New(heartbeat.Options{Store: store.New(d), RunnerID: "other-runner", LeaseTTL: 3 * time.Second,
			Adapters: map[string]heartbeat.Adapter{"process": heartbeat.ProcessAdapter{}}})
		r, _ = start(false)
		cancel(other, r, "cancelled elsewhere")
		got = e.wait(t, r.ID)
		if got.Status != domain.RunCancelled || got.Error != "run cancelled: cancelled elsewhere" {
			t.Fatalf("remote cancel: %+v", got)
		}

		// A queued run (its agent busy with another) is cancelled at once.
		busy, _ := start(false)
		queued, _, err := e.svc.Wakeup(ctx, busy.AgentID, heartbeat.WakeRequest{Reason: "second"})
		if err != nil || queued.Status != domain.RunQueued {
			t.Fatalf("second wake: %+v %v", queued, err)
		}
		if err := e.st.Tx(ctx, func(tx *sql.Tx) error {
			return e.svc.CancelRunTx(ctx, tx, queued, "by hand", domain.ActivityActor{Kind: "board", ID: "tester"})
		}); err != nil {
			t.Fatal(err)
		}
		if got, _ := e.st.GetRun(ctx, d, queued.ID); got.Status != domain.RunCancelled || got.Error != "run cancelled: by hand" {
			t.Fatalf("queued run after cancel: %+v", got)
		}
		cancel(e.svc, busy, "done")
		e.wait(t, busy.ID)
	})
}

// TestHTTPAdapterGuards: the run token goes to the configured host only —
// a redirect is not followed (the run fails with the 3xx) — and an http
// agent whose URL no instance administrator approved cannot reach a
// loopback or private address: the connection is refused when dialled.
func TestHTTPAdapterGuards(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		e := newEnv(t, d)
		ctx := context.Background()
		var elsewhere, hits atomic.Int32
		target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			elsewhere.Add(1)
			w.WriteHeader(http.StatusOK)
		}))
		defer target.Close()
		redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			hits.Add(1)
			http.Redirect(w, r, target.URL+"/stolen", http.StatusTemporaryRedirect)
		}))
		defer redirector.Close()

		approved := e.agent(t, "http", map[string]any{"url": redirector.URL})
		r, _, _ := e.svc.Wakeup(ctx, approved.ID, heartbeat.WakeRequest{Reason: "hook"})
		got := e.wait(t, r.ID)
		if got.Status != domain.RunFailed || got.Error != "http adapter answered 307" || hits.Load() != 1 || elsewhere.Load() != 0 {
			t.Fatalf("redirect: %s %q hits=%d elsewhere=%d", got.Status, got.Error, hits.Load(), elsewhere.Load())
		}

		unapproved := e.agent(t, "http", map[string]any{"url": target.URL})
		unapproved.HostExecutionApproved = false
		if err := e.st.UpdateAgent(ctx, d, &unapproved); err != nil {
			t.Fatal(err)
		}
		r, _, _ = e.svc.Wakeup(ctx, unapproved.ID, heartbeat.WakeRequest{Reason: "hook"})
		got = e.wait(t, r.ID)
		if got.Status != domain.RunFailed || !strings.Contains(got.Error, "public address") || elsewhere.Load() != 0 {
			t.Fatalf("unapproved loopback URL: %s %q reached=%d", got.Status, got.Error, elsewhere.Load())
		}
	})
}
