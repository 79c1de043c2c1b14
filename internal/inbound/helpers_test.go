package inbound_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/agentmail"
	"github.com/paperclipai/paperclipai/internal/config"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/emulator"
	"github.com/paperclipai/paperclipai/internal/store"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// wait is the deadline for conditions in these tests; it is generous
// because CI machines have two cores and run both databases.
const wait = 30 * time.Second

// env is a server with one connected inbox.
type env struct {
	*testkit.EmailEnv
	t       *testing.T
	EpID    string
	Address string
}

// newEnv starts a server on url with one inbox connected over WebSocket
// (extra setup fields, such as receiveMode, may override that).
func newEnv(t *testing.T, url, username string, extra map[string]any, mutate ...func(*config.Config)) *env {
	t.Helper()
	e := &env{EmailEnv: testkit.NewEmailEnv(t, url, mutate...), t: t}
	if username != "" {
		e.connect(username, extra)
	}
	return e
}

func (e *env) connect(username string, extra map[string]any) {
	e.t.Helper()
	sum := e.Setup(username, extra)
	e.EpID, _ = sum["id"].(string)
	e.Address, _ = sum["address"].(string)
	if e.EpID == "" || e.Address == "" {
		e.t.Fatalf("setup summary: %v", sum)
	}
}

// waitSocket waits until the inbox has a subscribed live connection and
// the catch-up scan of its subscription is over, so mail delivered next is
// admitted by the socket (not by a scan that happens to list it first).
func (e *env) waitSocket() {
	e.t.Helper()
	testkit.Eventually(e.t, wait, "a subscribed and caught-up WebSocket", func() bool {
		return e.Inbound.SocketCaughtUp(e.EpID) && e.Em.WebSocketCount() == 1
	})
}

func (e *env) deliver(req emulator.DeliverRequest) emulator.DeliverResult {
	e.t.Helper()
	if req.Subject == "" {
		req.Subject = "Hello"
	}
	return e.Deliver(e.t, e.Address, req)
}

func (e *env) deliveries() []store.EmailDelivery {
	e.t.Helper()
	return e.Deliveries(e.t, e.EpID)
}

// settled waits until n deliveries exist and none is waiting.
func (e *env) settled(n int) []store.EmailDelivery {
	e.t.Helper()
	var ds []store.EmailDelivery
	testkit.Eventually(e.t, wait, fmt.Sprintf("%d settled deliveries", n), func() bool {
		ds = e.deliveries()
		return len(ds) == n && testkit.Settled(ds)
	})
	return ds
}

func (e *env) delivery(messageID string) store.EmailDelivery {
	e.t.Helper()
	for _, d := range e.deliveries() {
		if strings.HasSuffix(d.DeduplicationKey, ":"+messageID) {
			return d
		}
	}
	e.t.Fatalf("no delivery for message %s", messageID)
	return store.EmailDelivery{}
}

// tasks returns the email tasks of the company, oldest first.
func (e *env) tasks() []domain.Issue {
	e.t.Helper()
	is, err := e.Store.ListIssues(context.Background(), e.Store.DB, e.CompanyID, store.IssueFilter{OriginKind: "chat_channel"})
	if err != nil {
		e.t.Fatal(err)
	}
	for i, j := 0, len(is)-1; i < j; i, j = i+1, j-1 {
		is[i], is[j] = is[j], is[i]
	}
	return is
}

// wakes returns the email wakes recorded for the agent.
func (e *env) wakes() []domain.Run {
	e.t.Helper()
	rs, err := e.Store.ListRuns(context.Background(), e.Store.DB, e.CompanyID, e.AgentID, "", 500)
	if err != nil {
		e.t.Fatal(err)
	}
	var out []domain.Run
	for _, r := range rs {
		if r.WakeReason == "email_received" {
			out = append(out, r)
		}
	}
	return out
}

func (e *env) messages(issueID string) []domain.EmailMessage {
	e.t.Helper()
	c, err := e.Store.ConversationByIssue(context.Background(), e.Store.DB, issueID)
	if err != nil {
		e.t.Fatal(err)
	}
	ms, err := e.Store.ListEmailMessages(context.Background(), e.Store.DB, c.ID)
	if err != nil {
		e.t.Fatal(err)
	}
	return ms
}

func (e *env) comments(issueID string) []domain.Comment {
	e.t.Helper()
	cs, err := e.Store.ListComments(context.Background(), e.Store.DB, issueID)
	if err != nil {
		e.t.Fatal(err)
	}
	return cs
}

func (e *env) setStatus(issueID, status string) {
	e.t.Helper()
	e.Board.JSON("PATCH", "/api/issues/"+issueID, map[string]any{"status": status}, 200)
}

// endpoint reloads the inbox row.
func (e *env) endpoint() domain.EmailEndpoint {
	e.t.Helper()
	ep, err := e.Store.GetEndpoint(context.Background(), e.Store.DB, e.EpID)
	if err != nil {
		e.t.Fatal(err)
	}
	return ep
}

// receivedFrame is a raw message.received event in the WebSocket style,
// carrying only the identifiers (as a provider may for large mail).
func receivedFrame(inbox, messageID, threadID string) []byte {
	b, _ := json.Marshal(map[string]any{"type": "event", "event_type": "message.received", "event_id": "evt_" + messageID,
		"message": map[string]any{"inbox_id": inbox, "message_id": messageID, "thread_id": threadID}})
	return b
}

// signedPost posts body to the inbox's webhook URL signed with secret at ts.
func signedPost(t *testing.T, base, publicID, secret string, body []byte, ts time.Time) int {
	t.Helper()
	return tamperedPost(t, base, publicID, secret, body, body, ts)
}

// tamperedPost signs signed but sends body.
func tamperedPost(t *testing.T, base, publicID, secret string, signed, body []byte, ts time.Time) int {
	t.Helper()
	id := "msg_" + store.NewID()
	sig, err := agentmail.SignWebhook(secret, id, ts, signed)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("POST", base+"/api/chat-webhooks/agentmail/"+publicID, strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("svix-id", id)
	req.Header.Set("svix-timestamp", fmt.Sprint(ts.Unix()))
	req.Header.Set("svix-signature", sig)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// withReplicas returns e's server and, on PostgreSQL, two more in-process
// replicas of it configured by mutate (SQLite allows one server).
// Replicas share the vault master key, as a deployment must.
func withReplicas(t *testing.T, e *testkit.EmailEnv, url string, mutate func(*config.Config)) []*testkit.Instance {
	t.Helper()
	replicas := []*testkit.Instance{e.Instance}
	if url == "" {
		return replicas
	}
	key, err := os.ReadFile(filepath.Join(e.Home, "instance", "secrets", "master.key"))
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		cfg := testkit.EmailConfig(testkit.Config(t, url), e.Em)
		mutate(&cfg)
		cfg.MasterKeyB64 = strings.TrimSpace(string(key))
		replicas = append(replicas, testkit.Start(t, cfg))
	}
	return replicas
}
