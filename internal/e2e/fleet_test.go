package e2e_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/apiclient"
	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/email"
	"github.com/paperclipai/paperclipai/internal/emulator"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// fleet is a set of `paperclipai run` replicas sharing one PostgreSQL
// database, one vault master key and one in-process emulator, each with
// its own home; a replica can be killed and started again on its home.
type fleet struct {
	t     *testing.T
	dbURL string
	em    *emulator.Server
	env   []string
	homes []string

	mu    sync.Mutex
	procs []*proc // nil while a replica is down
	next  int     // round-robin cursor of live
	// http is the client of every request the test makes to the replicas.
	http *http.Client
}

// newFleet starts n replicas on dbURL with short email timings (lease TTL
// 3 s, provider timeout 2 s) plus extraEnv.
func newFleet(t *testing.T, dbURL string, n int, extraEnv ...string) *fleet {
	t.Helper()
	k := make([]byte, 32)
	_, _ = rand.Read(k)
	em := testkit.StartEmulator(t)
	f := &fleet{t: t, dbURL: dbURL, em: em, http: &http.Client{Timeout: 20 * time.Second},
		env: append([]string{"PAPERCLIP_SECRETS_MASTER_KEY=" + base64.StdEncoding.EncodeToString(k),
			"PAPERCLIP_AGENTMAIL_API_URL=" + em.APIURL(), "PAPERCLIP_AGENTMAIL_WS_URL=" + em.WebSocketURL(),
			"PAPERCLIP_EMAIL_LEASE_TTL=3s", "PAPERCLIP_EMAIL_RECONNECT_MIN=200ms", "PAPERCLIP_EMAIL_CATCHUP_INTERVAL=5s",
			"PAPERCLIP_AGENTMAIL_TIMEOUT=2s"}, extraEnv...)}
	t.Cleanup(f.http.CloseIdleConnections)
	f.homes, f.procs = make([]string, n), make([]*proc, n)
	for i := range n {
		f.homes[i] = t.TempDir()
		f.start(i)
	}
	return f
}

// start starts replica i on its home and waits until it serves.
func (f *fleet) start(i int) {
	f.t.Helper()
	p := start(f.t, f.homes[i], f.dbURL, f.env...)
	f.mu.Lock()
	f.procs[i] = p
	f.mu.Unlock()
}

// kill SIGKILLs replica i.
func (f *fleet) kill(i int) {
	f.t.Helper()
	f.mu.Lock()
	p := f.procs[i]
	f.procs[i] = nil
	f.mu.Unlock()
	if p != nil {
		_ = p.stop(f.t, syscall.SIGKILL)
	}
}

// live returns the indexes of the running replicas.
func (f *fleet) live() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []int
	for i, p := range f.procs {
		if p != nil {
			out = append(out, i)
		}
	}
	return out
}

// url returns a running replica's base URL, round-robin.
func (f *fleet) url() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	for range f.procs {
		f.next = (f.next + 1) % len(f.procs)
		if p := f.procs[f.next]; p != nil {
			return p.url
		}
	}
	return ""
}

// client returns a board client of replica i (running).
func (f *fleet) client(i int) *testkit.Client {
	f.mu.Lock()
	defer f.mu.Unlock()
	return testkit.NewClient(f.t, f.procs[i].url)
}

// board returns a board client of a running replica (for set-up steps,
// which run while nothing is killed).
func (f *fleet) board() *testkit.Client { return testkit.NewClient(f.t, f.url()) }

// post sends a JSON request to some running replica until one answers
// with a status below 500 (a replica may be killed mid-request, or the
// database be down: the same request, with its idempotency key, is simply
// sent again), for at most limit. It returns the status and body.
func (f *fleet) post(path string, body any, limit time.Duration) (int, []byte, error) {
	raw, err := json.Marshal(body)
	if err != nil {
		return 0, nil, err
	}
	deadline := time.Now().Add(limit)
	for {
		st, out, err := f.postOnce(path, raw)
		if err == nil && st < 500 {
			return st, out, nil
		}
		if time.Now().After(deadline) {
			return st, out, fmt.Errorf("POST %s: no answer below 500 within %v (last: %d %s %v)", path, limit, st, out, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (f *fleet) postOnce(path string, raw []byte) (int, []byte, error) {
	base := f.url()
	if base == "" {
		return 0, nil, fmt.Errorf("no replica is running")
	}
	resp, err := f.http.Post(base+path, "application/json", bytes.NewReader(raw))
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	return resp.StatusCode, out, err
}

// mailWorld is what fleetSeed sets up: one company, agents each with an
// inbox (WebSocket), and the caps raised so a test's volume is not refused.
type mailWorld struct {
	companyID string
	agents    []string
	endpoints []string
	addresses []string
}

// fleetSeed creates the company, n paused agents (their wakes are recorded
// as refused runs, which keeps wakes cheap) and one WebSocket inbox each,
// and raises the per-thread and per-recipient send caps.
func fleetSeed(f *fleet, n int) mailWorld {
	t := f.t
	t.Helper()
	api, ctx, on := f.board().API(), context.Background(), true
	testkit.Must(api.PatchSettings(ctx, apiclient.SettingsPatch{
		Experimental: &apiclient.ExperimentalPatch{EnableChatConnectors: &on}}))(t, "enable email connections")
	w := mailWorld{companyID: testkit.Must(api.CreateCompany(ctx, "Fleet Mail"))(t, "create company").ID}
	for _, action := range []string{"email.thread_sends", "email.recipient_sends"} {
		testkit.Must(api.CreatePolicy(ctx, w.companyID, apiclient.NewPolicy{Action: action,
			Effect: "allow", RateLimitCount: 10_000, RateLimitWindowSeconds: 3600}))(t, "raise "+action)
	}
	_, key := f.em.CreateOrganization("Fleet Mail")
	adapter, paused := "process", "paused"
	for i := range n {
		name := fmt.Sprintf("Mail Agent %d", i)
		aid := testkit.Must(api.CreateAgent(ctx, w.companyID, apiclient.AgentInput{Name: &name,
			AdapterType: &adapter, AdapterConfig: json.RawMessage(`{"command":"/bin/true"}`)}))(t, "create agent").ID
		testkit.Must(api.PatchAgent(ctx, aid, apiclient.AgentInput{Status: &paused}))(t, "pause agent")
		sum := testkit.Must(api.SetupInbox(ctx, w.companyID, email.SetupInput{AssignedAgentID: aid,
			APIKey: key, Username: fmt.Sprintf("fleet%d", i), IdempotencyKey: testkit.NewUUID()}))(t, "set up inbox")
		if sum.Address == nil {
			t.Fatalf("inbox %s has no address", sum.ID)
		}
		w.agents = append(w.agents, aid)
		w.endpoints = append(w.endpoints, sum.ID)
		w.addresses = append(w.addresses, *sum.Address)
	}
	for _, addr := range w.addresses {
		testkit.Eventually(t, 30*time.Second, "a subscribed socket for "+addr, func() bool { return f.em.SubscribedCount(addr) == 1 })
	}
	return w
}

// conversation is an email task's conversation a test replies into.
type conversation struct {
	endpoint, issueID, conversationID, replyTo string
}

// inboundConversation delivers a first message from a customer to addr
// and returns its conversation once the task exists.
func (f *fleet) inboundConversation(w mailWorld, endpoint, addr, subject string) conversation {
	t := f.t
	t.Helper()
	if _, err := f.em.Deliver(addr, emulator.DeliverRequest{From: "Customer <customer@example.com>", Subject: subject,
		Text: "Opening " + subject}); err != nil {
		t.Fatal(err)
	}
	api, ctx := f.board().API(), context.Background()
	var c conversation
	testkit.Eventually(t, 30*time.Second, "the task "+subject, func() bool {
		for _, is := range testkit.Must(api.Issues(w.companyID).All(ctx, apiclient.Query("originKind", "chat_channel")))(t, "tasks") {
			if is.Title == subject {
				c.issueID = is.ID
			}
		}
		return c.issueID != ""
	})
	th := testkit.Must(api.Thread(ctx, w.companyID, c.issueID))(t, "the task's thread")
	if th == nil {
		t.Fatalf("task %s has no email thread", c.issueID)
	}
	for _, m := range th.Messages {
		if m.Direction == "inbound" {
			c.replyTo = m.ProviderMessageID
		}
	}
	c.endpoint, c.conversationID = endpoint, th.ConversationID
	return c
}

// sendOutcomes reads every publication's outcome, state and provider
// message id, by id.
type sendRow struct {
	outcome, state, messageID, conversationID string
	createdAt                                 time.Time
}

func sendRows(t *testing.T, d *db.DB) map[string]sendRow {
	t.Helper()
	rows, err := d.QueryContext(context.Background(), `SELECT p.id, s.outcome, p.state, COALESCE(p.provider_message_id, ''),
		p.conversation_id, p.created_at FROM email_publications p JOIN email_sends s ON s.publication_id = p.id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]sendRow{}
	for rows.Next() {
		var id string
		var r sendRow
		if err := rows.Scan(&id, &r.outcome, &r.state, &r.messageID, &r.conversationID, &r.createdAt); err != nil {
			t.Fatal(err)
		}
		out[id] = r
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// settledSends reports whether every one of keys is sent or delivered.
func settledSends(rows map[string]sendRow, keys []string) bool {
	for _, k := range keys {
		if r, ok := rows[k]; !ok || (r.outcome != "sent" && r.outcome != "delivered") {
			return false
		}
	}
	return true
}

// verifySends checks the end state of keys against the provider: every
// send sent or delivered and published, with the provider message the
// emulator holds for its idempotency key, exactly one provider message per
// key and none without a known key, and, per conversation, the provider
// messages in the order the sends were accepted (order[conv] lists its keys
// in acceptance order).
func verifySends(t *testing.T, em *emulator.Server, d *db.DB, keys []string, order map[string][]string) {
	t.Helper()
	rows := sendRows(t, d)
	byKey := map[string][]emulator.OutboxMessage{}
	position := map[string]int{}
	for i, m := range em.Outbox("", "") {
		if m.Headers["X-Paperclip-Publication-Id"] != m.IdempotencyKey {
			t.Fatalf("provider message %s: publication header %q, idempotency key %q", m.MessageID,
				m.Headers["X-Paperclip-Publication-Id"], m.IdempotencyKey)
		}
		byKey[m.IdempotencyKey] = append(byKey[m.IdempotencyKey], m)
		position[m.IdempotencyKey] = i
	}
	for _, k := range keys {
		r := rows[k]
		if (r.outcome != "sent" && r.outcome != "delivered") || r.state != "published" {
			t.Errorf("send %s: %s/%s", k, r.outcome, r.state)
		}
		if n := len(byKey[k]); n != 1 {
			t.Errorf("send %s: %d provider messages", k, n)
			continue
		}
		if r.messageID != byKey[k][0].MessageID {
			t.Errorf("send %s records provider message %q, the provider sent %q", k, r.messageID, byKey[k][0].MessageID)
		}
	}
	for k := range byKey {
		if !slices.Contains(keys, k) {
			t.Errorf("provider message with unknown idempotency key %q", k)
		}
	}
	for conv, ks := range order {
		for i := 1; i < len(ks); i++ {
			if position[ks[i]] < position[ks[i-1]] {
				t.Errorf("conversation %s: send %d (%s) reached the provider before send %d (%s)", conv, i, ks[i], i-1, ks[i-1])
			}
		}
	}
	if t.Failed() {
		t.FailNow()
	}
}
