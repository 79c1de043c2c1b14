package e2e_test

import (
	"context"
	"fmt"
	mrand "math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/emulator"
	"github.com/paperclipai/paperclipai/internal/store"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// Shape of the send chaos test: inboxes (one agent each), inbound threads
// per inbox each answered by several replies, and new emails per inbox.
const (
	chaosInboxes         = 3
	chaosThreadsPerInbox = 4
	chaosRepliesPerConv  = 20
	chaosEmailsPerInbox  = 20
	chaosKills           = 6
)

// TestSendChaosAcrossReplicas is the multi-replica send chaos test
// (PostgreSQL). First, a send accepted by a replica that dies before
// sending it is sent by an idle one (cross-replica pickup, through the
// send notification). Then three replicas, three inboxes, 300 sends (240 replies in
// twelve conversations, each conversation's replies accepted one after the
// other, and 60 new emails) accepted through random replicas while
// replicas are SIGKILLed at random and started again and the provider
// fails every tenth send with a 503 and stalls some others (the email goes
// out, the answer never comes). In the end every send is sent or
// delivered with the provider message the emulator holds for its
// idempotency key, the provider holds exactly one message per key, and
// each conversation's replies reached the provider in acceptance order.
// The settle time after the last restart is logged.
func TestSendChaosAcrossReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	url := dbtest.PostgresURL(t)
	f := newFleet(t, url, 3)
	w := fleetSeed(f, chaosInboxes)
	var convs []conversation
	for i, ep := range w.endpoints {
		for j := range chaosThreadsPerInbox {
			convs = append(convs, f.inboundConversation(w, ep, w.addresses[i], fmt.Sprintf("Chaos thread %d-%d", i, j)))
		}
	}
	parents := make([]string, chaosInboxes)
	b := f.board()
	for i := range parents {
		parents[i] = testkit.ID(b.JSON("POST", "/api/companies/"+w.companyID+"/issues", map[string]any{
			"title": fmt.Sprintf("Outreach %d", i), "assigneeAgentId": w.agents[i]}, 201))
	}
	d := openDB(t, db.Postgres, url, "")
	pickup := crossReplicaPickup(t, f, w, parents[0], d)

	// Provider faults on every send and reply: every tenth answers 503
	// unprocessed; of the rest, every seventeenth is processed and then
	// stalls until the client's 2 s timeout.
	for _, op := range []string{"send_message", "reply_message"} {
		f.em.AddFault(emulator.Fault{Match: emulator.FaultMatch{Operation: op}, Status: 503, Code: "service_unavailable", Every: 10})
		f.em.AddFault(emulator.Fault{Match: emulator.FaultMatch{Operation: op}, Stall: true, Every: 17})
	}

	seed := mrand.Uint64()
	t.Logf("kill schedule seed %d", seed)
	rng := mrand.New(mrand.NewPCG(seed, 2))
	t0 := time.Now()
	elapsed := func() time.Duration { return time.Since(t0).Round(time.Millisecond) }

	keys := []string{pickup}
	var keysMu sync.Mutex
	order := map[string][]string{}
	accept := func(body map[string]any) {
		st, out, err := f.post("/api/companies/"+w.companyID+"/email/send", body, 60*time.Second)
		if err != nil || st != 202 {
			t.Errorf("accept %s: %d %s %v", body["idempotencyKey"], st, out, err)
		}
	}
	var wg sync.WaitGroup
	var accepting atomic.Int32
	for _, c := range convs {
		accepting.Add(1)
		wg.Go(func() {
			defer accepting.Add(-1)
			for k := range chaosRepliesPerConv {
				key := testkit.NewUUID()
				keysMu.Lock()
				keys = append(keys, key)
				order[c.conversationID] = append(order[c.conversationID], key)
				keysMu.Unlock()
				accept(map[string]any{"endpointId": c.endpoint, "conversationId": c.conversationID, "replyToMessageId": c.replyTo,
					"text": fmt.Sprintf("Reply %d", k), "idempotencyKey": key})
				time.Sleep(time.Duration(200+mrand.IntN(300)) * time.Millisecond)
			}
		})
	}
	for i, ep := range w.endpoints {
		accepting.Add(1)
		wg.Go(func() {
			defer accepting.Add(-1)
			for k := range chaosEmailsPerInbox {
				key := testkit.NewUUID()
				keysMu.Lock()
				keys = append(keys, key)
				keysMu.Unlock()
				accept(map[string]any{"endpointId": ep, "parentIssueId": parents[i], "to": []string{fmt.Sprintf("lead%d@example.com", k)},
					"subject": fmt.Sprintf("Chaos email %d-%d", i, k), "text": "Hello", "idempotencyKey": key})
				time.Sleep(time.Duration(200+mrand.IntN(300)) * time.Millisecond)
			}
		})
	}

	// Kills: a random replica, while sends are accepted and executed; it
	// comes back a moment later, before the next kill, so two replicas are
	// always up.
	kills := 0
	for kills < chaosKills {
		time.Sleep(time.Duration(500+rng.IntN(1500)) * time.Millisecond)
		live := f.live()
		victim := live[rng.IntN(len(live))]
		f.kill(victim)
		kills++
		t.Logf("%v: kill %d: replica %d (SIGKILL); %d sends accepting", elapsed(), kills, victim, accepting.Load())
		time.Sleep(time.Duration(200+rng.IntN(800)) * time.Millisecond)
		f.start(victim)
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	restarted := time.Now()
	t.Logf("%v: all %d sends accepted, every replica running after %d kills", elapsed(), len(keys)-1, kills)

	testkit.Eventually(t, 120*time.Second, "every send sent or delivered", func() bool {
		return settledSends(sendRows(t, d), keys)
	})
	t.Logf("%v: settled %v after the last restart", elapsed(), time.Since(restarted).Round(time.Millisecond))
	logSlowestConversation(t, d)
	verifySends(t, f.em, d, keys, order)

	attempts, repeated := 0, 0
	perKey := map[string]int{}
	for _, r := range f.em.Requests("/v0/inboxes/") {
		if r.Method == "POST" && r.IdempotencyKey != nil && (strings.HasSuffix(r.Path, "/send") || strings.HasSuffix(r.Path, "/reply")) {
			perKey[*r.IdempotencyKey]++
			attempts++
		}
	}
	for _, n := range perKey {
		if n > 1 {
			repeated++
		}
	}
	t.Logf("provider send requests: %d for %d sends; %d sends attempted more than once (same key)", attempts, len(keys), repeated)

}

// crossReplicaPickup: a send accepted by a replica that dies before it
// can send is sent by another, idle replica, which learns of it only from
// the acceptance's notification. The test holds the send's thread lease so
// that the accepting replica cannot run it, kills that replica, and lets
// the lease go.
func crossReplicaPickup(t *testing.T, f *fleet, w mailWorld, parent string, d *db.DB) (key string) {
	t.Helper()
	ctx := context.Background()
	st := store.New(d)
	key = testkit.NewUUID()
	lease, _, err := st.TryLease(ctx, d, w.companyID, w.endpoints[0], store.ThreadLeaseKey("pending:"+key), "test", time.Minute)
	if err != nil || lease == nil {
		t.Fatalf("hold the thread: %v %v", lease, err)
	}
	f.client(0).JSON("POST", "/api/companies/"+w.companyID+"/email/send", map[string]any{"endpointId": w.endpoints[0],
		"parentIssueId": parent, "to": []string{"pickup@example.com"}, "subject": "Picked up", "text": "Hello",
		"idempotencyKey": key}, 202)
	f.kill(0)
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	released := time.Now()
	testkit.Eventually(t, 30*time.Second, "another replica to send it", func() bool {
		return settledSends(sendRows(t, d), []string{key})
	})
	t.Logf("cross-replica pickup: sent by another replica %v after the accepting one died and the thread was free",
		time.Since(released).Round(time.Millisecond))
	f.start(0)
	return key
}

// logSlowestConversation logs the conversation whose last send was
// published last: its sends, their attempts, and how long after its last
// acceptance it finished (head-of-line order makes a conversation wait
// out every retry of each of its sends in turn).
func logSlowestConversation(t *testing.T, d *db.DB) {
	t.Helper()
	var conv string
	var sends, attempts int
	var lastAccepted, lastPublished time.Time
	err := d.QueryRowContext(context.Background(), `SELECT conversation_id, COUNT(*), SUM(attempts), MAX(created_at), MAX(published_at)
		FROM email_publications GROUP BY conversation_id ORDER BY MAX(published_at) DESC LIMIT 1`).
		Scan(&conv, &sends, &attempts, &lastAccepted, &lastPublished)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("slowest conversation: %d sends, %d attempts, last published %v after its last acceptance",
		sends, attempts, lastPublished.Sub(lastAccepted).Round(time.Millisecond))
}
