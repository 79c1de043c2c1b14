package outbound_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/config"
	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/emulator"
	"github.com/paperclipai/paperclipai/internal/store"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// sendEnv is an email env with an active inbox and a parent task.
type sendEnv struct {
	*testkit.EmailEnv
	t        *testing.T
	endpoint string
	parent   string
}

func newSendEnv(t *testing.T, url string, mutate ...func(*config.Config)) *sendEnv {
	return newSendEnvMode(t, url, "websocket", mutate...)
}

// newSendEnvMode connects the inbox in the given receive mode. In webhook
// mode the public URL is unreachable, so no provider events come back: the
// worker alone must settle every send (no reconciliation shortcut).
func newSendEnvMode(t *testing.T, url, mode string, mutate ...func(*config.Config)) *sendEnv {
	t.Helper()
	mutate = append(mutate, func(c *config.Config) {
		c.AgentMailTimeout = 2 * time.Second
		c.PublicURL = "https://paperclip.invalid"
	})
	e := testkit.NewEmailEnv(t, url, mutate...)
	ep := e.Setup("sender", map[string]any{"receiveMode": mode})
	// Let the activation catch-up finish first: a scan running while a test
	// stalls a send could import the sent message and settle it early.
	testkit.Eventually(t, 30*time.Second, "the activation catch-up", func() bool {
		return e.Board.JSON("GET", "/api/email/inboxes/"+ep["id"].(string), nil, 200)["lastSyncAt"] != nil
	})
	parent := testkit.ID(e.Board.JSON("POST", "/api/companies/"+e.CompanyID+"/issues", map[string]any{"title": "Proposal",
		"assigneeAgentId": e.AgentID}, 201))
	return &sendEnv{EmailEnv: e, t: t, endpoint: ep["id"].(string), parent: parent}
}

func (e *sendEnv) newEmail(key, text string) map[string]any {
	return map[string]any{"endpointId": e.endpoint, "parentIssueId": e.parent, "to": []string{"client@example.com"},
		"subject": "Question about the proposal", "text": text, "idempotencyKey": key}
}

func (e *sendEnv) sendPath() string { return "/api/companies/" + e.CompanyID + "/email/send" }

func (e *sendEnv) delivery(id string) map[string]any {
	return e.Board.JSON("GET", "/api/companies/"+e.CompanyID+"/email/deliveries/"+id, nil, 200)
}

func (e *sendEnv) waitOutcome(id string, outcomes ...string) map[string]any {
	e.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		d := e.delivery(id)
		for _, o := range outcomes {
			if d["outcome"] == o {
				return d
			}
		}
		if time.Now().After(deadline) {
			var worker []string
			for _, l := range strings.Split(e.Logs.String(), "\n") {
				if strings.Contains(l, "outbound") || strings.Contains(l, "send") {
					worker = append(worker, l)
				}
			}
			e.t.Fatalf("delivery %s did not become %s: %v\nworker log:\n%s", id, strings.Join(outcomes, "/"), d, strings.Join(worker, "\n"))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// allSendRequests counts every provider send request.
func (e *sendEnv) allSendRequests() int {
	n := 0
	for _, r := range e.Em.Requests("/v0/inboxes/sender@agentmail.to/messages/send") {
		if r.Method == "POST" {
			n++
		}
	}
	return n
}

// sendRequests returns the provider send requests carrying key.
func (e *sendEnv) sendRequests(key string) int {
	n := 0
	for _, r := range e.Em.Requests("/v0/inboxes/sender@agentmail.to/messages") {
		if r.Method == "POST" && r.IdempotencyKey != nil && *r.IdempotencyKey == key {
			n++
		}
	}
	return n
}

// Board actor: acceptance persists the child task and the
// intent before any provider contact; replays and conflicting reuse; one
// provider send keyed by the publication id with our headers.
func TestSendNewEmail(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := newSendEnv(t, url)
		key := testkit.NewUUID()
		acc := e.Board.JSON("POST", e.sendPath(), e.newEmail(key, "Could you clarify the delivery date?"), 202)
		if acc["id"] != key || acc["outcome"] != "queued" || acc["issueId"] == e.parent || acc["conversationId"] == nil {
			t.Fatalf("acceptance: %v", acc)
		}
		// No attempt yet; the worker owns the send; a board user asked for it.
		who, _ := acc["requestedBy"].(map[string]any)
		if acc["attempts"] != float64(0) || acc["firstAttemptAt"] != nil || acc["retrying"] != true || acc["confirmationExpired"] != false ||
			who == nil || who["userId"] == nil || who["agentId"] != nil || who["runId"] != nil {
			t.Fatalf("accepted send's attempt fields: %v", acc)
		}
		child := e.Board.JSON("GET", "/api/issues/"+acc["issueId"].(string), nil, 200)
		if child["parentId"] != e.parent || child["assigneeAgentId"] != e.AgentID || child["originKind"] != "chat_channel" || child["status"] != "todo" {
			t.Fatalf("child task: %v", child)
		}
		// The intent committed before the provider saw anything.
		var queuedAt time.Time
		if err := e.DB.QueryRowContext(context.Background(), `SELECT created_at FROM activity_log WHERE action = 'email.queued' AND entity_id = $1`, key).Scan(&queuedAt); err != nil {
			t.Fatal(err)
		}
		d := e.waitOutcome(key, "sent", "delivered")
		for _, r := range e.Em.Requests("/v0/inboxes/sender@agentmail.to/messages/send") {
			if r.At.Before(queuedAt) {
				t.Fatalf("provider contacted (%v) before the intent committed (%v)", r.At, queuedAt)
			}
		}
		if d["providerMessageId"] == nil || d["error"] != nil {
			t.Fatalf("sent summary: %v", d)
		}
		if d["attempts"] != float64(1) || d["firstAttemptAt"] == nil || d["nextAttemptAt"] != nil || d["retrying"] != false || d["confirmationExpired"] != false {
			t.Fatalf("sent send's attempt fields: %v", d)
		}
		if again := e.Board.JSON("POST", e.sendPath(), e.newEmail(key, "Could you clarify the delivery date?"), 202); again["id"] != key {
			t.Fatalf("identical resubmit: %v", again)
		}
		st, body := e.Board.Do("POST", e.sendPath(), e.newEmail(key, "Something else"))
		if st != 409 || !strings.Contains(string(body), "different content") {
			t.Fatalf("changed content: %d %s", st, body)
		}
		out := e.Em.Outbox("client@example.com", "")
		if len(out) != 1 {
			t.Fatalf("outbox holds %d messages", len(out))
		}
		m := out[0]
		if m.IdempotencyKey != key || m.Headers["X-Paperclip-Publication-Id"] != key || m.Headers["Auto-Submitted"] != "auto-generated" ||
			m.Headers["X-Auto-Response-Suppress"] != "All" || m.Subject != "Question about the proposal" {
			t.Fatalf("provider request: key=%s headers=%v", m.IdempotencyKey, m.Headers)
		}
		thread := e.Board.JSON("GET", "/api/companies/"+e.CompanyID+"/email/tasks/"+acc["issueId"].(string), nil, 200)
		if thread["conversationId"] != acc["conversationId"] || len(thread["publications"].([]any)) != 1 {
			t.Fatalf("thread: %v", thread)
		}
		if st, body := e.Board.Do("GET", "/api/companies/"+e.CompanyID+"/email/tasks/"+e.parent, nil); st != 200 || strings.TrimSpace(string(body)) != "null" {
			t.Fatalf("a task without email context: %d %s", st, body)
		}
		// Sending email never changes task status.
		if p := e.Board.JSON("GET", "/api/issues/"+e.parent, nil, 200); p["status"] != "todo" {
			t.Fatalf("parent status changed: %v", p["status"])
		}
	})
}

// A transient failure leaves the send
// uncertain and retries it with the same key until it is sent.
func TestTransientFailuresRetryWithTheSameKey(t *testing.T) {
	faults := []struct {
		name  string
		fault emulator.Fault
	}{
		{"503", emulator.Fault{Status: 503, Code: "service_unavailable"}},
		{"429 with Retry-After", emulator.Fault{Status: 429, Code: "rate_limit_exceeded", Headers: map[string]string{"Retry-After": "1"}}},
		{"stalled response after the send", emulator.Fault{Stall: true}},
		{"timeout after the send", emulator.Fault{DelayMS: 5000}},
	}
	for _, f := range faults {
		t.Run(f.name, func(t *testing.T) {
			// Each fault has its own server, emulator and databases, and
			// spends its time waiting out a backoff or a timeout.
			t.Parallel()
			dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
				e := newSendEnvMode(t, url, "webhook")
				f.fault.Match = emulator.FaultMatch{Operation: "send_message"}
				f.fault.Times = 1
				e.Em.AddFault(f.fault)
				key := testkit.NewUUID()
				e.Board.JSON("POST", e.sendPath(), e.newEmail(key, "retry me"), 202)
				testkit.Eventually(t, 30*time.Second, "the first attempt to fail", func() bool {
					d := e.delivery(key)
					return d["outcome"] != "queued"
				})
				d := e.waitOutcome(key, "sent", "delivered")
				if d["error"] != nil {
					t.Fatalf("sent send keeps an error: %v", d)
				}
				// A refused first attempt (503, 429) is always retried once. A
				// stalled or timed-out attempt did reach the provider; the
				// retry (or the sent-message reconciliation that may beat it)
				// settles it. Either way every attempt carries the same key.
				testkit.Eventually(t, 30*time.Second, "the in-flight attempt to finish", func() bool { return e.sendRequests(key) >= 1 })
				n, all := e.sendRequests(key), e.allSendRequests()
				if n != all || (f.fault.Status != 0 && n != 2) || n > 2 {
					t.Fatalf("provider saw %d attempts with the key out of %d", n, all)
				}
				if n := len(e.Em.Outbox("client@example.com", "")); n != 1 {
					t.Fatalf("outbox holds %d messages: the retry duplicated the email", n)
				}
			})
		})
	}
}

// The 23-hour confirmation window, and resolving an uncertain send both ways.
func TestConfirmationWindowAndOperatorResolution(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := newSendEnvMode(t, url, "webhook")
		ctx := context.Background()
		// Every attempt stalls: the email goes out but no answer comes back.
		e.Em.AddFault(emulator.Fault{Match: emulator.FaultMatch{Operation: "send_message"}, Stall: true})
		keys := []string{testkit.NewUUID(), testkit.NewUUID()}
		for _, k := range keys {
			e.Board.JSON("POST", e.sendPath(), e.newEmail(k, "window "+k[:4]), 202)
		}
		for _, k := range keys {
			e.waitOutcome(k, "uncertain")
		}
		// While retrying, the summary says so and when the next attempt is.
		testkit.Eventually(t, 30*time.Second, "a recorded failed attempt", func() bool {
			d := e.delivery(keys[0])
			return d["attempts"].(float64) >= 1 && d["nextAttemptAt"] != nil
		})
		if d := e.delivery(keys[0]); d["retrying"] != true || d["confirmationExpired"] != false || d["firstAttemptAt"] == nil {
			t.Fatalf("uncertain send's attempt fields: %v", d)
		}
		for _, k := range keys {
			if err := e.Store.SetFirstAttempt(ctx, e.DB, k, e.Store.Now().Add(-25*time.Hour)); err != nil {
				t.Fatal(err)
			}
			if _, err := e.DB.ExecContext(ctx, `UPDATE email_publications SET next_attempt_at = NULL WHERE id = $1`, k); err != nil {
				t.Fatal(err)
			}
		}
		e.Outbound.Notify()
		testkit.Eventually(t, 30*time.Second, "both sends to park as delivery_unknown", func() bool {
			var n int
			e.DB.QueryRowContext(ctx, `SELECT COUNT(*) FROM email_publications WHERE state = 'delivery_unknown'`).Scan(&n)
			return n == 2
		})
		// Attempts already in flight finish (and are recorded) within the
		// client timeout; after that nothing new may start.
		time.Sleep(2500 * time.Millisecond)
		before := e.sendRequests(keys[0]) + e.sendRequests(keys[1])
		e.Outbound.Notify()
		time.Sleep(500 * time.Millisecond)
		if after := e.sendRequests(keys[0]) + e.sendRequests(keys[1]); after != before {
			t.Fatalf("no attempt may start after 23 hours: %d → %d", before, after)
		}
		d := e.delivery(keys[0])
		if d["outcome"] != "uncertain" || !strings.Contains(d["error"].(string), "confirmation window has expired") ||
			d["retrying"] != false || d["confirmationExpired"] != true || d["nextAttemptAt"] != nil {
			t.Fatalf("expired send: %v", d)
		}
		e.Em.ClearFaults()
		resolve := func(k string, body map[string]any, want int) map[string]any {
			return e.Board.JSON("POST", "/api/companies/"+e.CompanyID+"/email/deliveries/"+k+"/resolve", body, want)
		}
		// "failed": the operator confirms it was not sent.
		out := resolve(keys[0], map[string]any{"outcome": "failed"}, 200)
		if out["outcome"] != "failed" || !strings.Contains(out["error"].(string), "Operator confirmed") {
			t.Fatalf("resolve failed: %v", out)
		}
		resolve(keys[0], map[string]any{"outcome": "failed"}, 409)
		// "sent": the provider message carrying our header proves it.
		var msgID string
		for _, m := range e.Em.Outbox("client@example.com", "") {
			if m.Headers["X-Paperclip-Publication-Id"] == keys[1] {
				msgID = m.MessageID
			}
		}
		resolve(keys[1], map[string]any{"outcome": "sent"}, 400)
		var other string
		for _, m := range e.Em.Outbox("client@example.com", "") {
			if m.Headers["X-Paperclip-Publication-Id"] == keys[0] {
				other = m.MessageID
			}
		}
		if st, body := e.Board.Do("POST", "/api/companies/"+e.CompanyID+"/email/deliveries/"+keys[1]+"/resolve",
			map[string]any{"outcome": "sent", "providerMessageId": other}); st != 400 || !strings.Contains(string(body), "does not match") {
			t.Fatalf("another send's message: %d %s", st, body)
		}
		out = resolve(keys[1], map[string]any{"outcome": "sent", "providerMessageId": msgID}, 200)
		if out["outcome"] != "sent" || out["providerMessageId"] != msgID {
			t.Fatalf("resolve sent: %v", out)
		}
	})
}

// Isolation, revoked authority and budgets fail
// queued sends without a provider call.
func TestAuthorityIsCheckedAgainAtExecution(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := newSendEnv(t, url)
		// Another company's endpoint id is not found.
		other := testkit.ID(e.Board.JSON("POST", "/api/companies", map[string]any{"name": "Other"}, 201))
		req := e.newEmail(testkit.NewUUID(), "x")
		if st, body := e.Board.Do("POST", "/api/companies/"+other+"/email/send", req); st != 404 || !strings.Contains(string(body), "Email inbox not found") {
			t.Fatalf("other company: %d %s", st, body)
		}
		// A member queues a send while its thread is busy (the test holds the
		// thread lease), then loses write access before the worker runs it.
		m := e.Board.JSON("POST", "/api/companies/"+e.CompanyID+"/members", map[string]any{"email": "m@example.com", "role": "member"}, 201)
		k := e.Board.JSON("POST", "/api/companies/"+e.CompanyID+"/board-keys", map[string]any{"userId": m["userId"]}, 201)
		member := e.Board.As(k["token"].(string), "")
		key := testkit.NewUUID()
		ctx := context.Background()
		lease, _, err := e.Store.TryLease(ctx, e.DB, e.CompanyID, e.endpoint, store.ThreadLeaseKey("pending:"+key), "test", time.Minute)
		if err != nil || lease == nil {
			t.Fatalf("hold the thread: %v %v", lease, err)
		}
		member.JSON("POST", e.sendPath(), e.newEmail(key, "from a member"), 202)
		e.Board.JSON("POST", "/api/companies/"+e.CompanyID+"/members", map[string]any{"userId": m["userId"], "role": "viewer"}, 201)
		if err := lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
		e.Outbound.Notify()
		d := e.waitOutcome(key, "failed")
		if !strings.Contains(d["error"].(string), "write access") || e.sendRequests(key) != 0 {
			t.Fatalf("suspended member: %v, %d provider calls", d, e.sendRequests(key))
		}
		// Viewers cannot queue at all.
		if st, _ := member.Do("POST", e.sendPath(), e.newEmail(testkit.NewUUID(), "viewer")); st != 403 {
			t.Fatalf("viewer send: %d", st)
		}
	})
}

// Loop guards: per-recipient caps answer 429 with Retry-After; a permanently
// bounced recipient is refused fast as failed.
func TestLoopGuards(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := newSendEnv(t, url)
		e.Board.JSON("POST", "/api/companies/"+e.CompanyID+"/action-policies", map[string]any{"action": "email.recipient_sends",
			"effect": "allow", "rateLimitCount": 2, "rateLimitWindowSeconds": 3600}, 201)
		for i := range 2 {
			e.Board.JSON("POST", e.sendPath(), e.newEmail(testkit.NewUUID(), "n"+string(rune('0'+i))), 202)
		}
		st, body := e.Board.Do("POST", e.sendPath(), e.newEmail(testkit.NewUUID(), "third"))
		if st != 429 || !strings.Contains(string(body), "limit") {
			t.Fatalf("third send to one recipient: %d %s", st, body)
		}
		// Suppressed recipient: recorded, failed at once, never sent.
		if err := e.Store.Suppress(context.Background(), e.DB, e.CompanyID, e.endpoint, "gone@example.com", "message.bounced"); err != nil {
			t.Fatal(err)
		}
		req := e.newEmail(testkit.NewUUID(), "to a bounced address")
		req["to"] = []string{"gone@example.com"}
		acc := e.Board.JSON("POST", e.sendPath(), req, 202)
		if acc["outcome"] != "failed" || !strings.Contains(acc["error"].(string), "bounced") {
			t.Fatalf("suppressed recipient: %v", acc)
		}
		time.Sleep(100 * time.Millisecond)
		if n := len(e.Em.Outbox("gone@example.com", "")); n != 0 {
			t.Fatalf("a suppressed recipient was mailed %d times", n)
		}
	})
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func jsonDecode(t *testing.T, resp *http.Response, v any) {
	t.Helper()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
}
