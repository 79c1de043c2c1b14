package inbound_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/emulator"
	"github.com/paperclipai/paperclipai/internal/store"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// cluster is a set of `paperclipai run` processes sharing one database,
// one vault key and one emulator.
type cluster struct {
	t         testing.TB
	em        *emulator.Server
	dbURL     string
	masterKey string
	homes     []string
	// env is appended to every replica's environment (later entries win).
	env []string
}

type runProc struct {
	cmd  *exec.Cmd
	url  string
	done chan struct{}
	logs *testkit.SyncBuffer
}

func newCluster(t testing.TB, dbURL string) *cluster {
	k := make([]byte, 32)
	_, _ = rand.Read(k)
	return &cluster{t: t, em: testkit.StartEmulator(t), dbURL: dbURL, masterKey: base64.StdEncoding.EncodeToString(k)}
}

func freeAddr(t testing.TB) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// start launches a replica on home (created when empty) and waits until it
// serves.
func (c *cluster) start(home string) *runProc {
	t := c.t
	t.Helper()
	if home == "" {
		home = t.TempDir()
	}
	addr := freeAddr(t)
	cmd := exec.Command(testkit.Binary(t), "run", "--home", home, "--listen", addr)
	cmd.Env = append(os.Environ(), "PAPERCLIP_DATABASE_URL="+c.dbURL, "PAPERCLIP_SECRETS_MASTER_KEY="+c.masterKey,
		"PAPERCLIP_AGENTMAIL_API_URL="+c.em.APIURL(), "PAPERCLIP_AGENTMAIL_WS_URL="+c.em.WebSocketURL(),
		"PAPERCLIP_RUN_LEASE_TTL=3s", "PAPERCLIP_SHUTDOWN_GRACE=5s",
		"PAPERCLIP_EMAIL_LEASE_TTL=3s", "PAPERCLIP_EMAIL_RECONNECT_MIN=200ms", "PAPERCLIP_EMAIL_CATCHUP_INTERVAL=2s")
	cmd.Env = append(cmd.Env, c.env...)
	p := &runProc{cmd: cmd, url: "http://" + addr, done: make(chan struct{}), logs: &testkit.SyncBuffer{}}
	cmd.Stdout, cmd.Stderr = io.Discard, p.logs
	var copyTo *os.File
	if dir := os.Getenv("PAPERCLIP_TEST_REPLICA_LOGS"); dir != "" {
		// A replica's log (and, with GODEBUG=gctrace=1, its collector's
		// trace) to lay beside the database's when a benchmark's tail is
		// looked into; named by the replica's listen address.
		f, err := os.Create(filepath.Join(dir, "replica-"+strings.ReplaceAll(addr, ":", "-")+".log"))
		if err != nil {
			t.Fatal(err)
		}
		copyTo = f
		cmd.Stderr = io.MultiWriter(p.logs, f)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if copyTo != nil {
		t.Cleanup(func() { _ = copyTo.Close() })
	}
	go func() { _ = cmd.Wait(); close(p.done) }()
	t.Cleanup(p.kill)
	testkit.Eventually(t, wait, "replica healthy", func() bool {
		select {
		case <-p.done:
			t.Fatalf("replica exited: %s", p.logs.String())
		default:
		}
		resp, err := http.Get(p.url + "/api/health")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	return p
}

func (p *runProc) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// seed creates a company, a paused agent (its wakes are recorded as refused
// runs, which keeps hundreds of wakes cheap) and an inbox over WebSocket.
func (c *cluster) seed(p *runProc) (companyID, agentID, endpointID, address string) {
	b := testkit.NewClient(c.t, p.url)
	b.JSON("PATCH", "/api/instance/settings", map[string]any{"experimental": map[string]any{"enableChatConnectors": true}}, 200)
	companyID = testkit.ID(b.JSON("POST", "/api/companies", map[string]any{"name": "Crash Co"}, 201))
	agentID = testkit.ID(b.JSON("POST", "/api/companies/"+companyID+"/agents", map[string]any{"name": "Mail Agent",
		"adapterType": "process", "adapterConfig": map[string]any{"command": "/bin/true"}}, 201))
	b.JSON("PATCH", "/api/agents/"+agentID, map[string]any{"status": "paused"}, 200)
	_, key := c.em.CreateOrganization("Crash Mail")
	sum := b.JSON("POST", "/api/companies/"+companyID+"/email/inboxes", map[string]any{"assignedAgentId": agentID,
		"apiKey": key, "username": "crashy", "idempotencyKey": testkit.NewUUID()}, 201)
	return companyID, agentID, sum["id"].(string), sum["address"].(string)
}

// openDB opens the cluster's database for inspection (SQLite: the file in
// home, read alongside the running process thanks to WAL).
func (c *cluster) openDB(home string) *store.Store {
	c.t.Helper()
	d, err := db.Open(context.Background(), c.dbURL, filepath.Join(home, "instance", "db", "paperclip.db"))
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { d.Close() })
	return store.New(d)
}

// sendThreads delivers n messages round-robin over threads, each message
// after the first of its thread replying to the previous one; it returns
// the message ids per thread in send order.
func sendThreads(t *testing.T, em *emulator.Server, address string, n, threads int, pace time.Duration, stop *atomic.Bool) [][]string {
	ids := make([][]string, threads)
	for i := range n {
		th, k := i%threads, i/threads
		req := emulator.DeliverRequest{From: fmt.Sprintf("customer%d@example.com", th), Subject: fmt.Sprintf("Thread %d", th),
			Text: fmt.Sprintf("thread %d message %d", th, k), MessageID: fmt.Sprintf("<t%d-m%d@example.com>", th, k)}
		if k > 0 {
			req.Subject = "Re: " + req.Subject
			req.InReplyTo = ids[th][k-1]
		}
		res, err := em.Deliver(address, req)
		if err != nil {
			t.Errorf("deliver: %v", err)
			return ids
		}
		ids[th] = append(ids[th], res.MessageID)
		time.Sleep(pace)
	}
	stop.Store(true)
	return ids
}

// verify checks the end state: every message retained exactly once, one
// task per thread, one wake per message, and per-thread order of the
// retained mail on each task.
func verify(t *testing.T, st *store.Store, companyID, agentID, endpointID string, ids [][]string, total int) {
	t.Helper()
	verifyWithin(t, 90*time.Second, st, companyID, agentID, endpointID, ids, total)
}

// verifyWithin is verify with the deadline for the deliveries to settle.
func verifyWithin(t *testing.T, within time.Duration, st *store.Store, companyID, agentID, endpointID string, ids [][]string, total int) {
	t.Helper()
	ctx := context.Background()
	testkit.Eventually(t, within, fmt.Sprintf("%d settled deliveries", total), func() bool {
		ds, err := st.ListDeliveries(ctx, st.DB, endpointID)
		if err != nil || len(ds) != total {
			return false
		}
		for _, d := range ds {
			if d.State != domain.DeliveryProcessed {
				return false
			}
		}
		return true
	})
	var retained int
	if err := st.DB.QueryRowContext(ctx, `SELECT COUNT(*) FROM email_messages WHERE endpoint_id = $1`, endpointID).Scan(&retained); err != nil {
		t.Fatal(err)
	}
	testkit.MustEqual(t, "retained messages", retained, total)
	convs, err := st.ListConversations(ctx, st.DB, endpointID)
	if err != nil {
		t.Fatal(err)
	}
	testkit.MustEqual(t, "tasks (conversations)", len(convs), len(ids))
	var wakes, keys int
	if err := st.DB.QueryRowContext(ctx, `SELECT COUNT(*), COUNT(DISTINCT idempotency_key) FROM heartbeat_runs
		WHERE agent_id = $1 AND wake_reason = 'email_received'`, agentID).Scan(&wakes, &keys); err != nil {
		t.Fatal(err)
	}
	testkit.MustEqual(t, "wakes", wakes, total)
	testkit.MustEqual(t, "distinct wake keys", keys, total)
	for _, c := range convs {
		ms, err := st.ListEmailMessages(ctx, st.DB, c.ID)
		if err != nil {
			t.Fatal(err)
		}
		comments, err := st.ListComments(ctx, st.DB, c.IssueID)
		if err != nil {
			t.Fatal(err)
		}
		at := map[string]time.Time{}
		for _, cm := range comments {
			at[cm.ID] = cm.CreatedAt
		}
		var thread []string
		for _, th := range ids {
			if len(th) > 0 && len(ms) > 0 && th[0] == ms[0].ProviderMessageID {
				thread = th
			}
		}
		testkit.MustEqual(t, "messages in thread", len(ms), len(thread))
		byID := map[string]domainMsg{}
		for _, m := range ms {
			byID[m.ProviderMessageID] = domainMsg{commentAt: at[m.CommentID]}
		}
		for k := 1; k < len(thread); k++ {
			if byID[thread[k]].commentAt.Before(byID[thread[k-1]].commentAt) {
				t.Fatalf("thread order broken at message %d of %s", k, thread[0])
			}
		}
	}
}

type domainMsg struct{ commentAt time.Time }

// Crash test: the server is killed with SIGKILL at random points while 300
// messages across 30 threads arrive; after the final restart every message
// is retained exactly once, every one woke the agent exactly once, and each
// thread's mail is retained in order.
func TestCrashRecoveryKeepsExactlyOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		c := newCluster(t, url)
		home := t.TempDir()
		p := c.start(home)
		companyID, agentID, epID, address := c.seed(p)
		seed := mrand.Uint64()
		t.Logf("kill schedule seed %d", seed)
		rng := mrand.New(mrand.NewPCG(seed, 1))
		var stop atomic.Bool
		var ids [][]string
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { defer wg.Done(); ids = sendThreads(t, c.em, address, 300, 30, 10*time.Millisecond, &stop) }()
		kills := 0
		for !stop.Load() && kills < 5 {
			time.Sleep(time.Duration(100+rng.IntN(600)) * time.Millisecond)
			p.kill()
			kills++
			p = c.start(home)
		}
		wg.Wait()
		t.Logf("killed %d times", kills)
		verify(t, c.openDB(home), companyID, agentID, epID, ids, 300)
	})
}

// Multi-replica chaos test (PostgreSQL): three replicas, one database, one
// emulator; 1,000 messages across 100 threads while every WebSocket is
// dropped every second and a half, a tenth of message and thread reads
// fail with 503, and the replica holding the inbox's socket is SIGKILLed
// (and replaced) again and again. There is never more than one live socket
// for the inbox, and the end state is one task per thread and every
// message retained and woken for exactly once, in thread order. The time
// from the last delivery until everything settled is logged; the only
// deadline is a generous one.
func TestThreeReplicasWithDropsAndAKill(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	const messages, threads, kills = 1000, 100, 4
	url := dbtest.PostgresURL(t)
	c := newCluster(t, url)
	procs := []*runProc{c.start("")}
	companyID, agentID, epID, address := c.seed(procs[0])
	procs = append(procs, c.start(""), c.start(""))
	testkit.Eventually(t, wait, "one socket", func() bool { return c.em.WebSocketCount() == 1 })
	for _, op := range []string{"get_message", "get_thread"} {
		c.em.AddFault(emulator.Fault{Match: emulator.FaultMatch{Operation: op}, Status: 503, Code: "service_unavailable", Every: 10})
	}

	// The sampler counts live sockets; it pauses from just before a kill
	// until every socket left belongs to a live replica, since the dead
	// replica's connection lingers in the emulator until it notices the
	// close.
	var stop, sampling atomic.Bool
	var mu sync.Mutex
	sampling.Store(true)
	var maxSockets atomic.Int64
	go func() {
		for sampling.Load() {
			mu.Lock()
			if n := int64(c.em.WebSocketCount()); n > maxSockets.Load() {
				maxSockets.Store(n)
			}
			mu.Unlock()
			time.Sleep(2 * time.Millisecond)
		}
	}()
	go func() {
		for !stop.Load() {
			time.Sleep(1500 * time.Millisecond)
			c.em.DropWebSockets()
		}
	}()
	var ids [][]string
	done := make(chan struct{})
	go func() {
		defer close(done)
		ids = sendThreads(t, c.em, address, messages, threads, 12*time.Millisecond, &stop)
	}()

	seed := mrand.Uint64()
	t.Logf("kill schedule seed %d", seed)
	rng := mrand.New(mrand.NewPCG(seed, 2))
	pids := func() []int {
		out := make([]int, len(procs))
		for i, p := range procs {
			out[i] = p.cmd.Process.Pid
		}
		return out
	}
	for k := 0; k < kills; {
		time.Sleep(time.Duration(1500+rng.IntN(1500)) * time.Millisecond)
		owners := socketOwners(c.em.WebSocketPeers(), pids())
		victim := -1
		for i, p := range procs {
			for _, pid := range owners {
				if pid == p.cmd.Process.Pid {
					victim = i
				}
			}
		}
		if victim < 0 {
			continue // between a drop and the reconnect: try again
		}
		mu.Lock()
		procs[victim].kill()
		procs[victim] = procs[len(procs)-1]
		procs = procs[:len(procs)-1]
		live := pids()
		testkit.Eventually(t, wait, "the killed replica's socket gone", func() bool {
			peers := c.em.WebSocketPeers()
			return len(socketOwners(peers, live)) == len(peers)
		})
		mu.Unlock()
		k++
		t.Logf("kill %d: socket holder SIGKILLed", k)
		procs = append(procs, c.start(""))
	}
	<-done
	last := time.Now()
	st := c.openDB("")
	verifyWithin(t, 5*time.Minute, st, companyID, agentID, epID, ids, messages)
	settled := time.Since(last)
	failed := 0
	for _, rr := range c.em.Requests("/v0/inboxes/") {
		if rr.Status == 503 {
			failed++
		}
	}
	var attempts int
	if err := st.DB.QueryRowContext(context.Background(), `SELECT COALESCE(MAX(attempts), 0) FROM email_deliveries WHERE endpoint_id = $1`,
		epID).Scan(&attempts); err != nil {
		t.Fatal(err)
	}
	// Retries back off 1 s, 2 s, 4 s … per failed attempt, so the most
	// retried delivery mostly sets the settle time.
	t.Logf("settled %s after the last delivery (%d kills of the socket holder, drops every 1.5 s, %d message and thread reads failed with 503, "+
		"most retried delivery: %d failed attempts)", settled.Round(time.Millisecond), kills, failed, attempts)
	if failed == 0 {
		t.Fatal("no provider read failed: the faults did not apply")
	}
	stop.Store(true)
	sampling.Store(false)
	ctx := context.Background()
	var retained, distinct, tasks int
	if err := st.DB.QueryRowContext(ctx, `SELECT COUNT(*), COUNT(DISTINCT provider_message_id) FROM email_messages WHERE endpoint_id = $1`,
		epID).Scan(&retained, &distinct); err != nil {
		t.Fatal(err)
	}
	testkit.MustEqual(t, "distinct retained messages", distinct, messages)
	if err := st.DB.QueryRowContext(ctx, `SELECT COUNT(*) FROM issues WHERE company_id = $1 AND origin_kind = 'chat_channel'`,
		companyID).Scan(&tasks); err != nil {
		t.Fatal(err)
	}
	testkit.MustEqual(t, "email tasks", tasks, threads)
	if n := maxSockets.Load(); n > 1 {
		t.Fatalf("%d sockets were open for one inbox at the same time", n)
	}
	for _, p := range procs {
		if strings.Contains(p.logs.String(), "panic") {
			t.Fatal("a replica panicked")
		}
	}
}
