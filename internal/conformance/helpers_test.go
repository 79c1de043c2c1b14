package conformance_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/agentmail"
	"github.com/paperclipai/paperclipai/internal/config"
	"github.com/paperclipai/paperclipai/internal/emulator"
	"github.com/paperclipai/paperclipai/internal/store"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// wait bounds every wait for an event: generous, because CI machines have
// two cores and run both databases.
const wait = 30 * time.Second

// env is a server with an emulator and, once connect ran, one inbox.
type env struct {
	*testkit.EmailEnv
	t    *testing.T
	ep   string
	addr string
}

func newEnv(t *testing.T, databaseURL string, mutate ...func(*config.Config)) *env {
	t.Helper()
	return &env{EmailEnv: testkit.NewEmailEnv(t, databaseURL, mutate...), t: t}
}

// connect sets an inbox up with the org key and waits for its first
// catch-up scan (and, in WebSocket mode, a subscribed socket).
func (e *env) connect(username string, extra map[string]any) {
	e.t.Helper()
	sum := e.Setup(username, extra)
	e.ep, e.addr = sum["id"].(string), sum["address"].(string)
	e.waitReceiving()
}

func (e *env) waitReceiving() {
	e.t.Helper()
	testkit.Eventually(e.t, wait, "the inbox's catch-up scan", func() bool {
		return e.inbox()["lastSyncAt"] != nil
	})
	if e.inbox()["receiveMode"] == "websocket" {
		testkit.Eventually(e.t, wait, "a subscribed socket", func() bool { return e.Em.SubscribedCount(e.addr) == 1 })
	}
}

func (e *env) inbox() map[string]any {
	return e.Board.JSON("GET", "/api/email/inboxes/"+e.ep, nil, 200)
}

// provider returns a provider client for key.
func (e *env) provider(key string) *agentmail.Client {
	e.t.Helper()
	c, err := agentmail.New(agentmail.Options{BaseURL: e.Em.APIURL(), APIKey: key})
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

// provCall makes a raw provider call with key and decodes the answer.
func (e *env) provCall(key, method, path string, body any) map[string]any {
	e.t.Helper()
	out := map[string]any{}
	if err := e.provider(key).Do(context.Background(), method, path, nil, body, &out); err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	return out
}

// inboxKey mints an inbox-scoped key for addr with the org key.
func (e *env) inboxKey(addr string) string {
	e.t.Helper()
	k, err := e.provider(e.OrgKey).CreateInboxAPIKey(context.Background(), addr, agentmail.CreateAPIKeyRequest{Name: "test"})
	if err != nil {
		e.t.Fatal(err)
	}
	return k.APIKey
}

func (e *env) createInbox(username string) string {
	e.t.Helper()
	in, err := e.provider(e.OrgKey).CreateInbox(context.Background(), agentmail.CreateInboxRequest{Username: username})
	if err != nil {
		e.t.Fatal(err)
	}
	return in.InboxID
}

func (e *env) deliver(req emulator.DeliverRequest) emulator.DeliverResult {
	e.t.Helper()
	return e.Deliver(e.t, e.addr, req)
}

// tasksTitled returns the email tasks with this title.
func (e *env) tasksTitled(title string) []map[string]any {
	var out []map[string]any
	for _, is := range e.Board.List("/api/companies/" + e.CompanyID + "/issues?originKind=chat_channel") {
		if is["title"] == title {
			out = append(out, is)
		}
	}
	return out
}

// task waits for exactly one email task with this title and returns its id.
func (e *env) task(title string) string {
	e.t.Helper()
	var id string
	testkit.Eventually(e.t, wait, "the task "+title, func() bool {
		ts := e.tasksTitled(title)
		if len(ts) > 1 {
			e.t.Fatalf("%d tasks titled %q", len(ts), title)
		}
		if len(ts) == 1 {
			id = ts[0]["id"].(string)
		}
		return id != ""
	})
	return id
}

// wakes returns the email wakes of a task.
func (e *env) wakes(taskID string) []map[string]any {
	var out []map[string]any
	for _, r := range e.Board.List("/api/companies/" + e.CompanyID + "/heartbeat-runs?issueId=" + taskID) {
		if r["wakeReason"] == "email_received" {
			out = append(out, r)
		}
	}
	return out
}

// deliveries returns the inbox's admitted events (all states).
func (e *env) deliveries() []store.EmailDelivery {
	e.t.Helper()
	return e.Deliveries(e.t, e.ep)
}

// deliveryOf returns the message.received delivery of a provider message.
func (e *env) deliveryOf(messageID string) (store.EmailDelivery, bool) {
	for _, d := range e.deliveries() {
		if d.DeduplicationKey == agentmail.EventMessageReceived+":"+messageID {
			return d, true
		}
	}
	return store.EmailDelivery{}, false
}

// settled waits until no delivery of the inbox is waiting.
func (e *env) settled() {
	e.t.Helper()
	testkit.Eventually(e.t, wait, "settled deliveries", func() bool { return testkit.Settled(e.deliveries()) })
}

func (e *env) sendPath() string { return "/api/companies/" + e.CompanyID + "/email/send" }

func (e *env) delivery(id string) map[string]any {
	return e.Board.JSON("GET", "/api/companies/"+e.CompanyID+"/email/deliveries/"+id, nil, 200)
}

func (e *env) waitOutcome(id string, outcomes ...string) map[string]any {
	e.t.Helper()
	var d map[string]any
	testkit.Eventually(e.t, wait, fmt.Sprintf("send %s to become %s", id, strings.Join(outcomes, "/")), func() bool {
		d = e.delivery(id)
		for _, o := range outcomes {
			if d["outcome"] == o {
				return true
			}
		}
		return false
	})
	return d
}

// reply builds a reply request to the newest inbound message of a task.
func (e *env) reply(taskID, text string) map[string]any {
	e.t.Helper()
	th := e.Board.JSON("GET", "/api/companies/"+e.CompanyID+"/email/tasks/"+taskID, nil, 200)
	var target string
	for _, m := range th["messages"].([]any) {
		if mm := m.(map[string]any); mm["direction"] == "inbound" {
			target = mm["providerMessageId"].(string)
		}
	}
	return map[string]any{"endpointId": e.ep, "conversationId": th["conversationId"], "replyToMessageId": target,
		"text": text, "idempotencyKey": testkit.NewUUID()}
}

// newEmail builds a new-email request under a fresh parent task.
func (e *env) newEmail(to, subject string) map[string]any {
	e.t.Helper()
	parent := testkit.ID(e.Board.JSON("POST", "/api/companies/"+e.CompanyID+"/issues", map[string]any{"title": "Parent of " + subject,
		"assigneeAgentId": e.AgentID}, 201))
	return map[string]any{"endpointId": e.ep, "parentIssueId": parent, "to": []string{to}, "subject": subject,
		"text": "Hello from " + subject, "idempotencyKey": testkit.NewUUID()}
}

// providerSends counts the provider send/reply requests of the inbox.
func (e *env) providerSends() int {
	n := 0
	for _, r := range e.Em.Requests("/v0/inboxes/" + e.addr + "/messages") {
		if r.Method == "POST" && (strings.HasSuffix(r.Path, "/send") || strings.HasSuffix(r.Path, "/reply")) {
			n++
		}
	}
	return n
}

// errorOf decodes an API error body.
func errorOf(t *testing.T, raw []byte) map[string]any {
	t.Helper()
	out := map[string]any{}
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("error body %s: %v", raw, err)
	}
	return out
}

// rawPost posts a JSON body as the local board and returns the response
// (closed body) for header checks.
func (e *env) rawPost(path, body string) *http.Response {
	e.t.Helper()
	req, err := http.NewRequest("POST", e.URL()+path, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

// encode encodes v for a raw request body.
func encode(v any) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}
