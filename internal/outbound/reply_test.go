package outbound_test

import (
	"bytes"
	"context"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/agentmail"
	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/emulator"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

func (e *sendEnv) count(query string, args ...any) int {
	e.t.Helper()
	var n int
	if err := e.DB.QueryRowContext(context.Background(), query, args...).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

func (e *sendEnv) runsFor(issueID string) int {
	return len(e.Board.List("/api/companies/" + e.CompanyID + "/heartbeat-runs?issueId=" + issueID))
}

func (e *sendEnv) outboxBy(key string) emulator.OutboxMessage {
	e.t.Helper()
	for _, m := range e.Em.Outbox("", "") {
		if m.IdempotencyKey == key {
			return m
		}
	}
	e.t.Fatalf("no outbox message with key %s", key)
	return emulator.OutboxMessage{}
}

// Receipts update only the publication — delivered is never
// downgraded by a later sent — and never create tasks, conversations or wakes.
func TestReceiptsTouchOnlyThePublication(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := newSendEnv(t, url)
		key := testkit.NewUUID()
		acc := e.Board.JSON("POST", e.sendPath(), e.newEmail(key, "receipts"), 202)
		e.waitOutcome(key, "delivered")
		m := e.outboxBy(key)
		ep, err := e.Store.GetEndpoint(context.Background(), e.DB, e.endpoint)
		if err != nil {
			t.Fatal(err)
		}
		tx, err := e.DB.BeginTx(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Outbound.HandleReceipt(context.Background(), tx, ep, agentmail.Event{Kind: agentmail.EventMessageSent, MessageID: m.MessageID}, nil); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		if d := e.delivery(key); d["outcome"] != "delivered" {
			t.Fatalf("a late sent receipt downgraded delivered: %v", d["outcome"])
		}
		child := acc["issueId"].(string)
		testkit.Eventually(t, 30*time.Second, "the sent message imported as context", func() bool {
			th := e.Board.JSON("GET", "/api/companies/"+e.CompanyID+"/email/tasks/"+child, nil, 200)
			return len(th["messages"].([]any)) == 1
		})
		if n := e.count(`SELECT COUNT(*) FROM issues WHERE company_id = $1`, e.CompanyID); n != 2 {
			t.Fatalf("tasks: %d, want parent + child", n)
		}
		if n := e.count(`SELECT COUNT(*) FROM email_conversations WHERE endpoint_id = $1`, e.endpoint); n != 1 {
			t.Fatalf("conversations: %d", n)
		}
		if n := e.runsFor(child) + e.runsFor(e.parent); n != 0 {
			t.Fatalf("receipts or our own sent mail woke the agent %d times", n)
		}
	})
}

// A bounce fails the send with a diagnostic that survives a
// later inbound reply re-importing the sent message; the recipient is then
// refused fast.
func TestBounceFailsTheSendAndSticks(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := newSendEnv(t, url)
		key := testkit.NewUUID()
		req := e.newEmail(key, "hello bounce")
		req["to"] = []string{"bounce@example.com"}
		e.Board.JSON("POST", e.sendPath(), req, 202)
		d := e.waitOutcome(key, "failed")
		if d["error"] != "AgentMail reported message.bounced" || d["receipt"] != "bounced" || d["label"] != "Sent, then bounced" {
			t.Fatalf("bounce diagnostic: %v %v %v", d["error"], d["receipt"], d["label"])
		}
		m := e.outboxBy(key)
		if _, err := e.Em.Deliver("sender@agentmail.to", emulator.DeliverRequest{From: "bounce@example.com", Subject: "Re: Question about the proposal",
			Text: "auto? no, a real reply", InReplyTo: m.MessageID}); err != nil {
			t.Fatal(err)
		}
		testkit.Eventually(t, 30*time.Second, "the reply to be retained", func() bool {
			th := e.Board.JSON("GET", "/api/companies/"+e.CompanyID+"/email/tasks/"+d["issueId"].(string), nil, 200)
			return len(th["messages"].([]any)) == 2
		})
		if again := e.delivery(key); again["outcome"] != "failed" || again["error"] != "AgentMail reported message.bounced" {
			t.Fatalf("the re-import erased the bounce: %v", again)
		}
		// One bounce in one send is over the 5 % bounce-rate limit: the
		// inbox's health says so (unless something worse is wrong).
		testkit.Eventually(t, 30*time.Second, "the bounce-rate warning", func() bool {
			ib := e.Board.JSON("GET", "/api/email/inboxes/"+e.endpoint, nil, 200)
			return ib["healthCode"] == "bounce_rate_high" && ib["health"] == "attention"
		})
	})
}

// A reply and the sent callback arriving before the send's
// response leave one conversation, two thread messages, the send sent and
// one wake for the reply.
func TestReplyRacingTheSendResponse(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := newSendEnv(t, url)
		e.Em.AddFault(emulator.Fault{Match: emulator.FaultMatch{Operation: "send_message"}, Stall: true, Times: 1})
		key := testkit.NewUUID()
		acc := e.Board.JSON("POST", e.sendPath(), e.newEmail(key, "racing"), 202)
		child := acc["issueId"].(string)
		// The provider has the message although our request has not returned.
		testkit.Eventually(t, 30*time.Second, "the stalled send to reach the provider", func() bool {
			for _, m := range e.Em.Outbox("client@example.com", "") {
				if m.IdempotencyKey == key {
					return true
				}
			}
			return false
		})
		m := e.outboxBy(key)
		if _, err := e.Em.Deliver("sender@agentmail.to", emulator.DeliverRequest{From: "client@example.com", Subject: "Re: Question about the proposal",
			Text: "Quick answer: Tuesday.", InReplyTo: m.MessageID, References: []string{m.MessageID}}); err != nil {
			t.Fatal(err)
		}
		testkit.Eventually(t, 30*time.Second, "one wake for the reply", func() bool { return e.runsFor(child) == 1 })
		d := e.waitOutcome(key, "sent", "delivered")
		if d["providerMessageId"] != m.MessageID {
			t.Fatalf("bound to %v, want %s", d["providerMessageId"], m.MessageID)
		}
		if n := e.count(`SELECT COUNT(*) FROM email_conversations WHERE endpoint_id = $1`, e.endpoint); n != 1 {
			t.Fatalf("conversations: %d, want 1", n)
		}
		th := e.Board.JSON("GET", "/api/companies/"+e.CompanyID+"/email/tasks/"+child, nil, 200)
		if n := len(th["messages"].([]any)); n != 2 {
			t.Fatalf("thread messages: %d, want 2", n)
		}
		time.Sleep(2500 * time.Millisecond) // let the stalled attempt time out and settle
		if n := e.runsFor(child); n != 1 {
			t.Fatalf("wakes: %d, want 1", n)
		}
		if n := len(e.Em.Outbox("client@example.com", "")); n != 1 {
			t.Fatalf("the retry after the stall sent a duplicate: %d", n)
		}
	})
}

// A later reply never overtakes an earlier send of
// the same conversation, even while the earlier one waits for its retry.
func TestSendsKeepOrderPerConversation(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := newSendEnv(t, url)
		res, err := e.Em.Deliver("sender@agentmail.to", emulator.DeliverRequest{From: "client@example.com", Subject: "Two answers please", Text: "?"})
		if err != nil {
			t.Fatal(err)
		}
		var th map[string]any
		testkit.Eventually(t, 30*time.Second, "the inbound thread", func() bool {
			issues := e.Board.List("/api/companies/" + e.CompanyID + "/issues?originKind=chat_channel")
			if len(issues) != 1 {
				return false
			}
			th = e.Board.JSON("GET", "/api/companies/"+e.CompanyID+"/email/tasks/"+testkit.ID(issues[0]), nil, 200)
			return th != nil && len(th["messages"].([]any)) == 1
		})
		e.Em.AddFault(emulator.Fault{Match: emulator.FaultMatch{Operation: "reply_message"}, Status: 503, Times: 1})
		first, second := testkit.NewUUID(), testkit.NewUUID()
		for i, k := range []string{first, second} {
			e.Board.JSON("POST", e.sendPath(), map[string]any{"endpointId": e.endpoint, "conversationId": th["conversationId"],
				"replyToMessageId": res.MessageID, "text": []string{"first", "second"}[i], "idempotencyKey": k}, 202)
		}
		e.waitOutcome(second, "sent", "delivered")
		a, b := e.outboxBy(first), e.outboxBy(second)
		if !a.SentAt.Before(b.SentAt) && !a.SentAt.Equal(b.SentAt) {
			t.Fatalf("the second reply overtook the first: %v vs %v", a.SentAt, b.SentAt)
		}
		if e.sendReplyAttempts(first) != 2 {
			t.Fatalf("the first reply was retried %d times", e.sendReplyAttempts(first))
		}
	})
}

func (e *sendEnv) sendReplyAttempts(key string) int {
	n := 0
	for _, r := range e.Em.Requests("/v0/inboxes/sender@agentmail.to/messages") {
		if r.Method == "POST" && r.IdempotencyKey != nil && *r.IdempotencyKey == key {
			n++
		}
	}
	return n
}

// Attachments of a send come only from the source task,
// travel base64, and are checked against the recorded digest at execution.
func TestSendAttachments(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := newSendEnv(t, url)
		upload := func(issue string, data []byte) map[string]any {
			var buf bytes.Buffer
			mw := multipart.NewWriter(&buf)
			pw, _ := mw.CreatePart(map[string][]string{"Content-Disposition": {`form-data; name="file"; filename="context.txt"`},
				"Content-Type": {"text/plain"}})
			pw.Write(data)
			mw.Close()
			req, _ := http.NewRequest("POST", e.URL()+"/api/issues/"+issue+"/attachments", &buf)
			req.Header.Set("Content-Type", mw.FormDataContentType())
			resp, err := http.DefaultClient.Do(req)
			if err != nil || resp.StatusCode != 201 {
				t.Fatalf("upload: %v %v", resp, err)
			}
			defer resp.Body.Close()
			out := map[string]any{}
			jsonDecode(t, resp, &out)
			return out
		}
		att := upload(e.parent, []byte("twelve bytes"))
		other := testkit.ID(e.Board.JSON("POST", "/api/companies/"+e.CompanyID+"/issues", map[string]any{"title": "other"}, 201))
		foreign := upload(other, []byte("not yours"))
		req := e.newEmail(testkit.NewUUID(), "see attached")
		req["attachmentIds"] = []string{testkit.ID(foreign)}
		if st, body := e.Board.Do("POST", e.sendPath(), req); st != 403 || !strings.Contains(string(body), "attachments must belong to the source task") {
			t.Fatalf("foreign attachment: %d %s", st, body)
		}
		key := testkit.NewUUID()
		req = e.newEmail(key, "see attached")
		req["attachmentIds"] = []string{testkit.ID(att)}
		e.Board.JSON("POST", e.sendPath(), req, 202)
		e.waitOutcome(key, "sent", "delivered")
		m := e.outboxBy(key)
		if len(m.Attachments) != 1 || m.Attachments[0].Filename != "context.txt" {
			t.Fatalf("outbox attachments: %+v", m.Attachments)
		}
		// The stored bytes change after they were selected: the send fails
		// unsent. (Fresh content: the first one is shared with the sent
		// message's attachment imported as context.)
		att = upload(e.parent, []byte("fresh  bytes"))
		sha := att["sha256"].(string)
		if _, err := e.DB.ExecContext(context.Background(), `UPDATE attachment_blob_chunks SET data = $1 WHERE sha256 = $2`,
			[]byte("tampered!!!!"), sha); err != nil {
			t.Fatal(err)
		}
		key2 := testkit.NewUUID()
		req = e.newEmail(key2, "again")
		req["attachmentIds"] = []string{testkit.ID(att)}
		e.Board.JSON("POST", e.sendPath(), req, 202)
		d := e.waitOutcome(key2, "failed")
		if !strings.Contains(d["error"].(string), "changed after selection") || e.sendRequests(key2) != 0 {
			t.Fatalf("tampered attachment: %v, %d provider calls", d, e.sendRequests(key2))
		}
	})
}
