// Package e2e_test drives the built paperclipai binary as separate
// processes: fresh start and restart, several replicas on one PostgreSQL
// database, crash recovery of runs and graceful shutdown.
package e2e_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// proc is a `paperclipai run` process; url is known once waitHealthy
// (or start) returned.
type proc struct {
	*child
	url string
}

// freePort returns a loopback address that was free a moment ago. Only
// for what must know an address before anything listens on it (the
// guides' commands, which name their ports): another process may take it
// first, so a test that can let its child bind port 0 and read the real
// address from its output does that instead.
func freePort(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// start launches `paperclipai run` and waits until /api/health answers.
func start(t *testing.T, home, dbURL string, env ...string) *proc {
	t.Helper()
	p := startNoWait(t, home, dbURL, env...)
	p.waitHealthy(t)
	return p
}

// startNoWait launches `paperclipai run` on port 0 without waiting for
// it: waitHealthy learns its address from the line it prints.
func startNoWait(t *testing.T, home, dbURL string, env ...string) *proc {
	t.Helper()
	cmd := exec.Command(testkit.Binary(t), "run", "--home", home, "--listen", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "PAPERCLIP_DATABASE_URL="+dbURL, "PAPERCLIP_RUN_LEASE_TTL=3s", "PAPERCLIP_SHUTDOWN_GRACE=20s")
	cmd.Env = append(cmd.Env, env...)
	return &proc{child: startChild(t, cmd)}
}

// waitHealthy waits for the server to say where it listens, then until
// /api/health answers; it fails at once, with the process's output, if
// the process exits first.
func (p *proc) waitHealthy(t *testing.T) {
	t.Helper()
	if p.url == "" {
		p.url = p.waitStdout(t, 60*time.Second, "the server to listen", listeningRE)[0]
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if resp, err := http.Get(p.url + "/api/health"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		if p.hasExited() {
			t.Fatalf("the server exited before it was healthy at %s\n%s", p.url, p.report())
		}
		if time.Now().After(deadline) {
			p.timedOut(t, 30*time.Second, "server health at "+p.url)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop sends sig and waits for exit, returning the exit error.
func (p *proc) stop(t *testing.T, sig syscall.Signal) error {
	t.Helper()
	_ = p.cmd.Process.Signal(sig)
	ok, err := p.waitExit(60 * time.Second)
	if !ok {
		p.timedOut(t, 60*time.Second, fmt.Sprintf("the server to exit after %v", sig))
	}
	return err
}

func TestFreshHomeStartsAndRestartReusesState(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, dialect db.Dialect, url string) {
		home := t.TempDir()
		p := start(t, home, url)
		c := testkit.NewClient(t, p.url)
		health := c.JSON("GET", "/api/health", nil, 200)
		if health["status"] != "ok" || health["database"] != string(dialect) {
			t.Fatalf("health: %v", health)
		}
		keyPath := filepath.Join(home, "instance", "secrets", "master.key")
		info, err := os.Stat(keyPath)
		if err != nil || info.Mode().Perm() != 0o600 {
			t.Fatalf("vault key: %v %v", info, err)
		}
		key1, _ := os.ReadFile(keyPath)
		if dialect == db.SQLite {
			if _, err := os.Stat(filepath.Join(home, "instance", "db", "paperclip.db")); err != nil {
				t.Fatalf("sqlite database not created: %v", err)
			}
		}
		cid := testkit.ID(c.JSON("POST", "/api/companies", map[string]any{"name": "Persisted"}, 201))
		sec := c.JSON("POST", "/api/companies/"+cid+"/secrets", map[string]any{"name": "k", "value": "v-123456"}, 201)
		if err := p.stop(t, syscall.SIGTERM); err != nil {
			t.Fatalf("graceful stop: %v\n%s", err, p.stderr.String())
		}
		p2 := start(t, home, url)
		c2 := testkit.NewClient(t, p2.url)
		c2.JSON("GET", "/api/companies/"+cid, nil, 200)
		key2, _ := os.ReadFile(keyPath)
		if string(key1) != string(key2) {
			t.Fatal("restart replaced the vault key")
		}
		if n := len(c2.List("/api/companies/" + cid + "/secrets")); n != 1 || testkit.ID(sec) == "" {
			t.Fatalf("secret metadata lost across restart: %d", n)
		}
	})
}

func TestReplicasStartTogether(t *testing.T) {
	t.Run("postgres: two replicas on one empty database", func(t *testing.T) {
		url := dbtest.PostgresURL(t)
		// Replicas share the master key (the server refuses another).
		key := "PAPERCLIP_SECRETS_MASTER_KEY=" + base64.StdEncoding.EncodeToString([]byte(strings.Repeat("k", 32)))
		var procs []*proc
		for range 2 {
			procs = append(procs, startNoWait(t, t.TempDir(), url, key))
		}
		for _, p := range procs {
			p.waitHealthy(t)
		}
		// A third with its own key (its home's generated key file) refuses
		// to start, and says why.
		odd := startNoWait(t, t.TempDir(), url)
		if ok, err := odd.waitExit(30 * time.Second); !ok {
			t.Fatalf("a replica with another master key kept running\n%s", odd.report())
		} else if err == nil || !strings.Contains(odd.stderr.String(), "the master key does not match this database") ||
			!strings.Contains(odd.stderr.String(), "PAPERCLIP_SECRETS_MASTER_KEY") {
			t.Fatalf("replica with another master key: %v\n%s", err, odd.report())
		}
		conn, err := pgx.Connect(context.Background(), url)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		var applied, distinct int
		if err := conn.QueryRow(context.Background(),
			`SELECT COUNT(*), COUNT(DISTINCT version_id) FROM goose_db_version WHERE version_id > 0`).Scan(&applied, &distinct); err != nil {
			t.Fatal(err)
		}
		if applied != distinct || applied == 0 {
			t.Fatalf("migrations applied %d times for %d versions", applied, distinct)
		}
		// Both replicas serve the same data.
		cid := testkit.ID(testkit.NewClient(t, procs[0].url).JSON("POST", "/api/companies", map[string]any{"name": "Shared"}, 201))
		testkit.NewClient(t, procs[1].url).JSON("GET", "/api/companies/"+cid, nil, 200)
	})
	t.Run("sqlite: a second process on the same home is refused", func(t *testing.T) {
		home := t.TempDir()
		start(t, home, "")
		p2 := startNoWait(t, home, "")
		if ok, err := p2.waitExit(30 * time.Second); !ok {
			t.Fatalf("second process on a locked home kept running\n%s", p2.report())
		} else if err == nil || !strings.Contains(p2.stderr.String(), "another paperclipai process is using this home") {
			t.Fatalf("second process: %v\n%s", err, p2.report())
		}
	})
}

// agentBody is a /bin/sh process agent running script.
func agentBody(name, script string) map[string]any {
	return map[string]any{"name": name, "adapterType": "process",
		"adapterConfig": map[string]any{"command": "/bin/sh", "args": []string{"-c", script}}}
}

func waitRuns(t *testing.T, c *testkit.Client, cid, aid string, pred func([]map[string]any) bool) []map[string]any {
	t.Helper()
	var runs []map[string]any
	testkit.Eventually(t, 60*time.Second, "runs of agent "+aid, func() bool {
		runs = c.List("/api/companies/" + cid + "/heartbeat-runs?agentId=" + aid)
		return pred(runs)
	})
	return runs
}

func TestRunOrphanedByKilledServerIsFailedAndRetriedOnce(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		home := t.TempDir()
		marker := filepath.Join(t.TempDir(), "first-attempt")
		p := start(t, home, url)
		c := testkit.NewClient(t, p.url)
		cid := testkit.ID(c.JSON("POST", "/api/companies", map[string]any{"name": "Crashy"}, 201))
		// First attempt blocks (and is orphaned by the crash); the retry finishes.
		script := fmt.Sprintf(`if [ -e %[1]s ]; then echo retry-ran; exit 0; fi; touch %[1]s; sleep 30`, marker)
		aid := testkit.ID(c.JSON("POST", "/api/companies/"+cid+"/agents", agentBody("Sleeper", script), 201))
		first := c.JSON("POST", "/api/agents/"+aid+"/wakeup", map[string]any{"reason": "work", "idempotencyKey": "once"}, 202)
		testkit.Eventually(t, 30*time.Second, "first attempt to start", func() bool { _, err := os.Stat(marker); return err == nil })
		_ = p.stop(t, syscall.SIGKILL)

		p2 := start(t, home, url)
		c2 := testkit.NewClient(t, p2.url)
		runs := waitRuns(t, c2, cid, aid, func(rs []map[string]any) bool {
			return len(rs) == 2 && rs[0]["status"] == "succeeded"
		})
		retry, orig := runs[0], runs[1]
		if testkit.ID(orig) != testkit.ID(first) || orig["status"] != "failed" || !strings.Contains(fmt.Sprint(orig["error"]), "runner lost") {
			t.Fatalf("orphaned run not failed: %v", orig)
		}
		if retry["retryOfRunId"] != testkit.ID(first) || retry["attempt"] != float64(2) {
			t.Fatalf("retry run: %v", retry)
		}
		// The same key still names the original run: no third run.
		again := c2.JSON("POST", "/api/agents/"+aid+"/wakeup", map[string]any{"reason": "work", "idempotencyKey": "once"}, 202)
		if testkit.ID(again) != testkit.ID(first) {
			t.Fatalf("replayed key created a new run")
		}
	})
}

func TestGracefulShutdownFinishesRunningRun(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		home := t.TempDir()
		started := filepath.Join(t.TempDir(), "started")
		p := start(t, home, url)
		c := testkit.NewClient(t, p.url)
		cid := testkit.ID(c.JSON("POST", "/api/companies", map[string]any{"name": "Graceful"}, 201))
		script := fmt.Sprintf(`touch %s; sleep 1; "$PC" api POST "/issues/$PAPERCLIP_TASK_ID/comments" --data '{"body":"finished during shutdown"}'`, started)
		body := agentBody("Finisher", script)
		body["adapterConfig"].(map[string]any)["env"] = map[string]string{"PC": testkit.Binary(t)}
		aid := testkit.ID(c.JSON("POST", "/api/companies/"+cid+"/agents", body, 201))
		iid := testkit.ID(c.JSON("POST", "/api/companies/"+cid+"/issues", map[string]any{"title": "t", "assigneeAgentId": aid}, 201))
		run := c.JSON("POST", "/api/agents/"+aid+"/wakeup", map[string]any{"reason": "work", "issueId": iid}, 202)
		testkit.Eventually(t, 30*time.Second, "run to start", func() bool { _, err := os.Stat(started); return err == nil })
		if err := p.stop(t, syscall.SIGTERM); err != nil {
			t.Fatalf("graceful stop: %v\n%s", err, p.stderr.String())
		}
		p2 := start(t, home, url)
		c2 := testkit.NewClient(t, p2.url)
		got := c2.JSON("GET", "/api/heartbeat-runs/"+testkit.ID(run), nil, 200)
		if got["status"] != "succeeded" {
			log := c2.JSON("GET", "/api/heartbeat-runs/"+testkit.ID(run)+"/log", nil, 200)
			t.Fatalf("run during shutdown: %v (log %v)\n%s", got["status"], log["content"], p.stderr.String())
		}
		if n := len(c2.List("/api/issues/" + iid + "/comments")); n != 1 {
			t.Fatalf("agent's callback during shutdown was lost: %d comments", n)
		}
	})
}
