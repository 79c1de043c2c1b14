package e2e_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/emulator"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// Shape of the database fault test.
const (
	faultInboxes        = 2
	faultThreads        = 6 // inbound threads per inbox
	faultMessages       = 120
	faultReplyConvs     = 2 // conversations per inbox that the test replies into
	faultRepliesPerConv = 15
	faultSleepers       = 4 // agent runs in flight during the outage
)

// TestDatabaseRestartUnderLoad cuts every connection of the replicas and
// then stops PostgreSQL immediately (as in a crash) while two replicas receive mail over
// WebSockets and send replies, keeps mail arriving and sends being
// submitted while it is down, and starts it again. Afterwards nothing is
// lost or doubled: every message is retained once and woke its agent
// once, one task per thread; every send is published once with the
// provider's message, in order per conversation. The time from the
// database accepting connections again to everything settled is logged;
// every worker, socket, lease and listener must recover on its own. Agent
// runs alive through the outage, whose run leases lapsed meanwhile, must
// not be failed as orphans by the other replica.
func TestDatabaseRestartUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	cluster := dbtest.StartCluster(t)
	// The production email lease TTL (90 s), not the fleet's 3 s: a lease
	// the outage strands would then show as a settle time near 90 s.
	f := newFleet(t, cluster.URL(), 2, "PAPERCLIP_EMAIL_LEASE_TTL=90s")
	w := fleetSeed(f, faultInboxes)
	var convs []conversation
	var seedMessages []string
	for i, ep := range w.endpoints {
		for j := range faultReplyConvs {
			c := f.inboundConversation(w, ep, w.addresses[i], fmt.Sprintf("Reply thread %d-%d", i, j))
			convs = append(convs, c)
			seedMessages = append(seedMessages, c.replyTo)
		}
	}
	d := openDB(t, db.Postgres, cluster.URL(), "")
	// Agent runs in flight through the outage, longer than the run lease
	// TTL (3 s): no replica may take another's live run for an orphan.
	b := f.board()
	var sleepers []string
	for i := range faultSleepers {
		aid := testkit.ID(b.JSON("POST", "/api/companies/"+w.companyID+"/agents", agentBody(fmt.Sprintf("Sleeper %d", i), "sleep 7"), 201))
		// Woken through each replica in turn, which claims the run at once.
		f.client(i%len(f.homes)).JSON("POST", "/api/agents/"+aid+"/wakeup", map[string]any{"reason": "work",
			"idempotencyKey": "through-the-outage"}, 202)
		sleepers = append(sleepers, aid)
	}
	for _, aid := range sleepers {
		waitRuns(t, b, w.companyID, aid, func(rs []map[string]any) bool { return len(rs) == 1 && rs[0]["status"] == "running" })
	}

	t0 := time.Now()
	elapsed := func() time.Duration { return time.Since(t0).Round(time.Millisecond) }
	var wg sync.WaitGroup

	// Inbound: messages round-robin over each inbox's threads, each reply
	// in a thread answering the previous message of that thread.
	delivered := make([][]string, faultInboxes) // provider message ids per inbox
	for i, addr := range w.addresses {
		wg.Go(func() {
			last := make([]string, faultThreads)
			for k := range faultMessages {
				th := k % faultThreads
				req := emulator.DeliverRequest{From: fmt.Sprintf("sender%d@example.com", th), Subject: fmt.Sprintf("Fault thread %d-%d", i, th),
					Text: fmt.Sprintf("message %d", k)}
				if last[th] != "" {
					req.Subject, req.InReplyTo = "Re: "+req.Subject, last[th]
				}
				res, err := f.em.Deliver(addr, req)
				if err != nil {
					t.Errorf("deliver: %v", err)
					return
				}
				last[th] = res.MessageID
				delivered[i] = append(delivered[i], res.MessageID)
				time.Sleep(40 * time.Millisecond)
			}
		})
	}
	// Outbound: each conversation's replies one after the other; a reply
	// submitted while the database is down is answered 5xx and submitted
	// again with its key.
	var keysMu sync.Mutex
	var keys []string
	order := map[string][]string{}
	for _, c := range convs {
		wg.Go(func() {
			for k := range faultRepliesPerConv {
				key := testkit.NewUUID()
				keysMu.Lock()
				keys = append(keys, key)
				order[c.conversationID] = append(order[c.conversationID], key)
				keysMu.Unlock()
				st, out, err := f.post("/api/companies/"+w.companyID+"/email/send", map[string]any{"endpointId": c.endpoint,
					"conversationId": c.conversationID, "replyToMessageId": c.replyTo, "text": fmt.Sprintf("Reply %d", k),
					"idempotencyKey": key}, 60*time.Second)
				if err != nil || st != 202 {
					t.Errorf("accept: %d %s %v", st, out, err)
					return
				}
				time.Sleep(150 * time.Millisecond)
			}
		})
	}

	// First every replica's connections are cut (the database stays up),
	// then the database itself goes down.
	time.Sleep(800 * time.Millisecond)
	var cut int
	if err := d.QueryRowContext(context.Background(), `SELECT COUNT(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid()`).Scan(&cut); err != nil {
		t.Fatal(err)
	}
	t.Logf("%v: cut %d connections", elapsed(), cut)
	time.Sleep(1200 * time.Millisecond)
	cluster.Stop()
	t.Logf("%v: database stopped (immediate)", elapsed())
	time.Sleep(3 * time.Second)
	cluster.Start()
	back := time.Now()
	t.Logf("%v: database accepting connections again", elapsed())
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	submitted := time.Now()
	t.Logf("%v: all mail delivered to the provider and all %d sends accepted", elapsed(), len(keys))

	var inbound []string
	inbound = append(inbound, seedMessages...)
	for _, ids := range delivered {
		inbound = append(inbound, ids...)
	}
	testkit.Eventually(t, 120*time.Second, "all mail retained and all sends settled", func() bool {
		return retainedCount(t, d, inbound) == len(inbound) && pendingDeliveries(t, d) == 0 && settledSends(sendRows(t, d), keys)
	})
	t.Logf("%v: settled %v after the database was back, %v after the last mail and send were submitted", elapsed(),
		time.Since(back).Round(time.Millisecond), time.Since(submitted).Round(time.Millisecond))

	for _, aid := range sleepers {
		runs := waitRuns(t, f.board(), w.companyID, aid, func(rs []map[string]any) bool {
			return len(rs) > 0 && rs[0]["status"] != "running" && rs[0]["status"] != "queued"
		})
		if len(runs) != 1 || runs[0]["status"] != "succeeded" {
			t.Fatalf("a run alive through the outage ended as %v (%d runs): %v", runs[0]["status"], len(runs), runs[0]["error"])
		}
	}
	verifySends(t, f.em, d, keys, order)
	verifyInbound(t, d, w, inbound, faultInboxes*(faultThreads+faultReplyConvs))
	for _, i := range f.live() {
		f.mu.Lock()
		logs := f.procs[i].stderr.String()
		f.mu.Unlock()
		if strings.Contains(logs, "panic") {
			t.Fatalf("replica %d panicked:\n%s", i, logs)
		}
	}
}

// retainedCount counts the given provider messages retained as inbound
// email messages.
func retainedCount(t *testing.T, d *db.DB, ids []string) int {
	t.Helper()
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	rows, err := d.QueryContext(context.Background(), `SELECT provider_message_id FROM email_messages WHERE direction = 'inbound'`)
	if err != nil {
		return -1 // the database may still be recovering
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var id string
		if rows.Scan(&id) == nil && want[id] {
			n++
		}
	}
	return n
}

// pendingDeliveries counts admitted deliveries not yet done.
func pendingDeliveries(t *testing.T, d *db.DB) int {
	t.Helper()
	var n int
	if err := d.QueryRowContext(context.Background(), `SELECT COUNT(*) FROM email_deliveries
		WHERE state IN ('received', 'processing', 'retry')`).Scan(&n); err != nil {
		return -1
	}
	return n
}

// verifyInbound checks that each inbound message was retained once and
// woke its agent once, and that each thread made one task.
func verifyInbound(t *testing.T, d *db.DB, w mailWorld, ids []string, threads int) {
	t.Helper()
	ctx := context.Background()
	var dup int
	if err := d.QueryRowContext(ctx, `SELECT COUNT(*) FROM (SELECT provider_message_id FROM email_messages
		GROUP BY endpoint_id, provider_message_id HAVING COUNT(*) > 1) x`).Scan(&dup); err != nil || dup != 0 {
		t.Fatalf("duplicated retained messages: %d %v", dup, err)
	}
	var convs int
	if err := d.QueryRowContext(ctx, `SELECT COUNT(*) FROM email_conversations WHERE company_id = $1`, w.companyID).Scan(&convs); err != nil {
		t.Fatal(err)
	}
	if convs != threads {
		t.Fatalf("%d conversations (tasks) for %d threads", convs, threads)
	}
	var wakes, wakeKeys int
	if err := d.QueryRowContext(ctx, `SELECT COUNT(*), COUNT(DISTINCT idempotency_key) FROM heartbeat_runs
		WHERE company_id = $1 AND wake_reason = 'email_received'`, w.companyID).Scan(&wakes, &wakeKeys); err != nil {
		t.Fatal(err)
	}
	if wakes != len(ids) || wakeKeys != len(ids) {
		t.Fatalf("%d wakes (%d distinct) for %d messages", wakes, wakeKeys, len(ids))
	}
}
