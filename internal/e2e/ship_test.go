package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"

	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/emulator"
	"github.com/paperclipai/paperclipai/internal/store"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// notifySocket is a fake systemd notification socket: it collects every
// datagram the server sends.
type notifySocket struct {
	path string
	mu   sync.Mutex
	msgs []string
}

func newNotifySocket(t *testing.T) *notifySocket {
	t.Helper()
	n := &notifySocket{path: filepath.Join(t.TempDir(), "notify.sock")}
	ln, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: n.path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		buf := make([]byte, 4096)
		for {
			k, err := ln.Read(buf)
			if err != nil {
				return
			}
			n.mu.Lock()
			n.msgs = append(n.msgs, string(buf[:k]))
			n.mu.Unlock()
		}
	}()
	return n
}

// states returns every assignment received, in order.
func (n *notifySocket) states() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []string
	for _, m := range n.msgs {
		out = append(out, strings.Split(m, "\n")...)
	}
	return out
}

func (n *notifySocket) index(state string) int {
	for i, s := range n.states() {
		if s == state {
			return i
		}
	}
	return -1
}

// TestSystemdNotify runs the server as a Type=notify unit would: it says
// READY=1 once it serves, feeds the watchdog, says STOPPING=1 on SIGTERM
// and exits 0.
func TestSystemdNotify(t *testing.T) {
	n := newNotifySocket(t)
	p := startNoWait(t, t.TempDir(), "", "NOTIFY_SOCKET="+n.path, "WATCHDOG_USEC=200000")
	p.waitHealthy(t)
	p.eventually(t, 30*time.Second, "READY=1", func() bool { return n.index("READY=1") >= 0 })
	p.eventually(t, 30*time.Second, "WATCHDOG=1 after READY=1", func() bool {
		w := n.index("WATCHDOG=1")
		return w > n.index("READY=1")
	})
	if n.index("STOPPING=1") >= 0 {
		t.Fatalf("STOPPING=1 before the stop: %q", n.states())
	}
	if err := p.stop(t, syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM: %v\n%s", err, p.report())
	}
	if i := n.index("STOPPING=1"); i < 0 {
		t.Fatalf("no STOPPING=1: %q", n.states())
	}
}

// TestPublicListenNeedsAuthenticatedMode: a server asked to listen beyond
// loopback (as in the container, PAPERCLIP_LISTEN=0.0.0.0:3100) refuses to
// start in local_trusted mode and says why; in authenticated mode it starts.
func TestPublicListenNeedsAuthenticatedMode(t *testing.T) {
	bin := testkit.Binary(t)
	code, out := runCmd(t, []string{"PAPERCLIP_LISTEN=0.0.0.0:0", "PAPERCLIP_DEPLOYMENT_MODE="}, bin, "run", "--home", t.TempDir())
	if code == 0 || !strings.Contains(out, "local_trusted is allowed only on a loopback listen address") || !strings.Contains(out, "authenticated") {
		t.Fatalf("run on 0.0.0.0 in local_trusted mode: exit %d\n%s", code, out)
	}
	cmd := exec.Command(bin, "run", "--home", t.TempDir())
	cmd.Env = append(os.Environ(), "PAPERCLIP_LISTEN=0.0.0.0:0", "PAPERCLIP_DEPLOYMENT_MODE=authenticated")
	p := &proc{child: startChild(t, cmd)}
	p.waitStdout(t, 60*time.Second, "the server to listen", listeningRE)
	if err := p.stop(t, syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM: %v\n%s", err, p.report())
	}
}

// setSchemaNewer makes the database look migrated by a newer binary.
func setSchemaNewer(t *testing.T, url, home string) {
	t.Helper()
	d, err := db.Open(context.Background(), url, filepath.Join(home, "instance", "db", "paperclip.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, q := range []string{`INSERT INTO goose_db_version (version_id, is_applied) VALUES (99999, true)`,
		`UPDATE schema_meta SET schema_version = 99999, binary_version = '99.0.0'`} {
		if _, err := d.ExecContext(context.Background(), q); err != nil {
			t.Fatal(err)
		}
	}
}

// TestUpgradeGuards: with PAPERCLIP_AUTO_MIGRATE=false a server refuses to
// start while migrations are pending (here: every one, on an empty
// database; exit 4) until `admin migrate` applies them (listed first by
// --dry-run); a binary older than the schema refuses to start (exit 3)
// and to migrate, naming both versions.
func TestUpgradeGuards(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		bin := testkit.Binary(t)
		home := t.TempDir()
		env := []string{"PAPERCLIP_DATABASE_URL=" + url}
		manual := append(env, "PAPERCLIP_AUTO_MIGRATE=false")
		code, out := runCmd(t, manual, bin, "run", "--home", home, "--listen", "127.0.0.1:0")
		if code != db.ExitSchemaPending || !strings.Contains(out, "admin migrate") {
			t.Fatalf("run with pending migrations and PAPERCLIP_AUTO_MIGRATE=false: exit %d, want %d\n%s", code, db.ExitSchemaPending, out)
		}
		code, out = runCmd(t, env, bin, "admin", "migrate", "--dry-run", "--home", home)
		if code != 0 || !strings.Contains(out, "pending: 00001 00001_core.sql") || !strings.Contains(out, "pending: 00023 00023_schema_meta.sql") {
			t.Fatalf("admin migrate --dry-run: exit %d\n%s", code, out)
		}
		code, out = runCmd(t, env, bin, "admin", "migrate", "--home", home)
		if code != 0 || !strings.Contains(out, "applied: 00023 00023_schema_meta.sql") {
			t.Fatalf("admin migrate: exit %d\n%s", code, out)
		}
		code, out = runCmd(t, env, bin, "admin", "migrate", "--dry-run", "--home", home)
		if code != 0 || !strings.Contains(out, "no pending migrations") || !strings.Contains(out, "last migrated by paperclipai ") {
			t.Fatalf("admin migrate --dry-run after migrating: exit %d\n%s", code, out)
		}
		p := startNoWait(t, home, url, "PAPERCLIP_AUTO_MIGRATE=false")
		p.waitHealthy(t)
		c := testkit.NewClient(t, p.url)
		cid := testkit.ID(c.JSON("POST", "/api/companies", map[string]any{"name": "Migrated by hand"}, 201))
		if got := c.JSON("GET", "/api/companies/"+cid, nil, 200); got["name"] != "Migrated by hand" {
			t.Fatalf("company: %v", got)
		}
		if err := p.stop(t, syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}

		setSchemaNewer(t, url, home)
		code, out = runCmd(t, env, bin, "run", "--home", home, "--listen", "127.0.0.1:0")
		if code != db.ExitSchemaNewer || !strings.Contains(out, "schema is newer than this binary") || !strings.Contains(out, "paperclipai 99.0.0") {
			t.Fatalf("run on a newer schema: exit %d, want %d\n%s", code, db.ExitSchemaNewer, out)
		}
		code, out = runCmd(t, env, bin, "admin", "migrate", "--dry-run", "--home", home)
		if code != db.ExitSchemaNewer {
			t.Fatalf("admin migrate --dry-run on a newer schema: exit %d\n%s", code, out)
		}
	})
}

// TestRestoreBackup backs up a SQLite home, changes it, is refused while
// the server runs, restores with the server stopped and sees the old state.
func TestRestoreBackup(t *testing.T) {
	bin := testkit.Binary(t)
	home := t.TempDir()
	backup := filepath.Join(t.TempDir(), "paperclip.db")
	p := start(t, home, "")
	c := testkit.NewClient(t, p.url)
	before := testkit.ID(c.JSON("POST", "/api/companies", map[string]any{"name": "Backed up"}, 201))
	if code, out := runCmd(t, nil, bin, "admin", "backup", "--home", home, "--out", backup); code != 0 {
		t.Fatalf("backup: exit %d\n%s", code, out)
	}
	after := testkit.ID(c.JSON("POST", "/api/companies", map[string]any{"name": "After the backup"}, 201))
	code, out := runCmd(t, nil, bin, "admin", "restore", "--home", home, backup)
	if code == 0 || !strings.Contains(out, "a paperclipai server is running") {
		t.Fatalf("restore under a running server: exit %d\n%s", code, out)
	}
	if got := c.JSON("GET", "/api/companies/"+after, nil, 200); got["name"] != "After the backup" {
		t.Fatalf("the refused restore changed the database: %v", got)
	}
	if err := p.stop(t, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	code, out = runCmd(t, nil, bin, "admin", "restore", "--home", home, backup)
	if code != 0 || !strings.Contains(out, "restored ") || !strings.Contains(out, "before-restore-") {
		t.Fatalf("restore: exit %d\n%s", code, out)
	}
	p = start(t, home, "")
	c = testkit.NewClient(t, p.url)
	if got := c.JSON("GET", "/api/companies/"+before, nil, 200); got["name"] != "Backed up" {
		t.Fatalf("company from before the backup: %v", got)
	}
	if st, _ := c.Do("GET", "/api/companies/"+after, nil); st != 404 {
		t.Fatalf("company created after the backup is still there: %d", st)
	}
	bad := filepath.Join(t.TempDir(), "not-a-db")
	if err := os.WriteFile(bad, []byte("not sqlite"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := p.stop(t, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code, out := runCmd(t, nil, bin, "admin", "restore", "--home", home, bad); code == 0 {
		t.Fatalf("restore of a file that is no database: exit 0\n%s", out)
	}
}

// socketHolders counts the live socket leases per holding process id.
func socketHolders(t *testing.T, d *db.DB) map[int]int {
	t.Helper()
	rows, err := d.QueryContext(context.Background(), `SELECT holder FROM email_leases WHERE lease_key = $1 AND expires_at > $2`,
		store.LeaseKeySocket, time.Now().UTC())
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[int]int{}
	for rows.Next() {
		var h string
		if err := rows.Scan(&h); err != nil {
			t.Fatal(err)
		}
		// The holder is host:pid:nonce (server.Start's runner id).
		parts := strings.Split(h, ":")
		pid, _ := strconv.Atoi(parts[len(parts)-2])
		out[pid]++
	}
	return out
}

// TestSIGTERMHandsSocketsOver: a replica stopped with SIGTERM while one
// of its runs is still running releases its inbox sockets before it waits
// for the run, so the other replica holds every socket while the first
// still drains (leases last 90 s here: only the release can move them);
// /readyz says draining; the run finishes, the process exits 0, and every
// email sent during and after the drain becomes a task.
func TestSIGTERMHandsSocketsOver(t *testing.T) {
	url := dbtest.PostgresURL(t)
	const inboxes = 3
	f := newFleet(t, url, 1, "PAPERCLIP_EMAIL_LEASE_TTL=90s")
	w := fleetSeed(f, inboxes)
	victim := f.procs[0]
	d, err := db.Open(context.Background(), url, "")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	testkit.Eventually(t, 30*time.Second, "the first replica to hold every socket", func() bool {
		return socketHolders(t, d)[victim.cmd.Process.Pid] == inboxes
	})

	// A run on the first replica (the only one yet) that lasts until the
	// test releases it.
	dir := t.TempDir()
	started, release := filepath.Join(dir, "started"), filepath.Join(dir, "release")
	b := f.client(0)
	aid := testkit.ID(b.JSON("POST", "/api/companies/"+w.companyID+"/agents",
		agentBody("Long runner", fmt.Sprintf(`touch %s; while [ ! -e %s ]; do sleep 0.05; done`, started, release)), 201))
	iid := testkit.ID(b.JSON("POST", "/api/companies/"+w.companyID+"/issues", map[string]any{"title": "long", "assigneeAgentId": aid}, 201))
	run := testkit.ID(b.JSON("POST", "/api/agents/"+aid+"/wakeup", map[string]any{"reason": "drain", "issueId": iid}, 202))
	victim.eventually(t, 30*time.Second, "the long run to start", func() bool { _, err := os.Stat(started); return err == nil })

	f.homes = append(f.homes, t.TempDir())
	f.procs = append(f.procs, nil)
	f.start(1)
	other := f.procs[1]
	if n := socketHolders(t, d)[other.cmd.Process.Pid]; n != 0 {
		t.Fatalf("the second replica took %d sockets while the first held them", n)
	}

	signalled := time.Now()
	if err := victim.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	victim.eventually(t, 30*time.Second, "the second replica to hold every socket while the first drains", func() bool {
		h := socketHolders(t, d)
		return h[other.cmd.Process.Pid] == inboxes && h[victim.cmd.Process.Pid] == 0
	})
	// A figure to report (issue 32 asks for under 2 s), never asserted:
	// what the test holds to is that the hand-over happens while the
	// first replica still drains, and that no email is lost.
	t.Logf("every socket held by the other replica %s after SIGTERM", time.Since(signalled).Round(time.Millisecond))
	for _, a := range w.addresses {
		testkit.Eventually(t, 30*time.Second, "one subscribed socket for "+a, func() bool { return f.em.SubscribedCount(a) == 1 })
	}
	code, r := readiness(t, victim.url+"/readyz")
	if code != 503 || len(r.Failing) != 1 || r.Failing[0] != "draining" {
		t.Fatalf("/readyz of the draining replica: %d %+v", code, r)
	}
	if victim.hasExited() {
		t.Fatalf("the first replica exited before its run finished\n%s", victim.report())
	}
	var subjects []string
	deliver := func(tag string) {
		for i, a := range w.addresses {
			s := fmt.Sprintf("%s %d", tag, i)
			if _, err := f.em.Deliver(a, emulator.DeliverRequest{From: "Customer <customer@example.com>", Subject: s, Text: s}); err != nil {
				t.Fatal(err)
			}
			subjects = append(subjects, s)
		}
	}
	deliver("During the drain")

	if err := os.WriteFile(release, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if ok, err := victim.waitExit(60 * time.Second); !ok || err != nil {
		t.Fatalf("the drained replica: exited %v, %v\n%s", ok, err, victim.report())
	}
	f.procs[0] = nil
	deliver("After the drain")

	c := f.client(1)
	if got := c.JSON("GET", "/api/heartbeat-runs/"+run, nil, 200); got["status"] != "succeeded" {
		t.Fatalf("the run that was running at SIGTERM: %v", got["status"])
	}
	testkit.Eventually(t, 60*time.Second, "a task for every email", func() bool {
		have := map[string]bool{}
		for _, is := range c.List("/api/companies/" + w.companyID + "/issues?originKind=chat_channel") {
			have[is["title"].(string)] = true
		}
		for _, s := range subjects {
			if !have[s] {
				return false
			}
		}
		return true
	})
}

// readiness reads a /readyz answer.
func readiness(t *testing.T, url string) (int, struct {
	Status  string   `json:"status"`
	Failing []string `json:"failing"`
}) {
	t.Helper()
	var r struct {
		Status  string   `json:"status"`
		Failing []string `json:"failing"`
	}
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return resp.StatusCode, r
}
