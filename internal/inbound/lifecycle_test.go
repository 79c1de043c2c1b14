package inbound_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/paperclipai/paperclipai/internal/agentmail"
	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/emulator"
	"github.com/paperclipai/paperclipai/internal/inbound/queue"
	"github.com/paperclipai/paperclipai/internal/inbound/receive"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// attachExisting creates a provider inbox before Paperclip knows it, so
// mail delivered now predates activation, and returns a func that connects
// it.
func attachExisting(t *testing.T, e *env, username string) (address string, connect func()) {
	t.Helper()
	c, _ := agentmail.New(agentmail.Options{BaseURL: e.Em.APIURL(), APIKey: e.OrgKey})
	in, err := c.CreateInbox(context.Background(), agentmail.CreateInboxRequest{Username: username})
	if err != nil {
		t.Fatal(err)
	}
	e.Address = in.InboxID
	return in.InboxID, func() {
		sum := e.Board.JSON("POST", "/api/companies/"+e.CompanyID+"/email/inboxes", map[string]any{
			"assignedAgentId": e.AgentID, "apiKey": e.OrgKey, "inboxId": in.InboxID, "idempotencyKey": testkit.NewUUID()}, 201)
		e.EpID = sum["id"].(string)
	}
}

// Mail from before
// activation is imported as context when a new message arrives in its
// thread, without a wake of its own; a reply to a done task reopens it and
// wakes; a reply to a cancelled task is retained without a wake.
func TestContextImportReopenAndCancelled(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := newEnv(t, url, "", nil)
		_, connect := attachExisting(t, e, "history")
		old := e.deliver(emulator.DeliverRequest{Subject: "Old thread", Text: "Before Paperclip", MessageID: "<old@example.com>"})
		connect()
		e.waitSocket()
		reply := e.deliver(emulator.DeliverRequest{Subject: "Re: Old thread", Text: "After activation", InReplyTo: "<old@example.com>"})
		testkit.MustEqual(t, "same thread", reply.ThreadID, old.ThreadID)
		e.settled(1)
		tasks := e.tasks()
		testkit.MustEqual(t, "tasks", len(tasks), 1)
		task := tasks[0]
		msgs := e.messages(task.ID)
		if len(msgs) != 2 || msgs[0].ProviderMessageID != old.MessageID || msgs[1].ProviderMessageID != reply.MessageID {
			t.Fatalf("context import: %+v", msgs)
		}
		testkit.MustEqual(t, "wakes", len(e.wakes()), 1)

		// A late delivery of the pre-activation message: filtered, no wake.
		ok, err := e.Inbound.AdmitRaw(context.Background(), e.endpoint(), receivedFrame(e.Address, old.MessageID, old.ThreadID), queue.SourceWebSocket)
		if err != nil || !ok {
			t.Fatalf("late admission: %v %v", ok, err)
		}
		ds := e.settled(2)
		testkit.MustEqual(t, "late delivery state", e.delivery(old.MessageID).State, domain.DeliveryFiltered)
		testkit.MustEqual(t, "wakes after late delivery", len(e.wakes()), 1)
		_ = ds

		e.setStatus(task.ID, domain.IssueDone)
		e.deliver(emulator.DeliverRequest{Subject: "Re: Old thread", Text: "One more thing", InReplyTo: reply.MessageID})
		e.settled(3)
		got, _ := e.Store.GetIssue(context.Background(), e.Store.DB, task.ID)
		testkit.MustEqual(t, "reopened status", got.Status, domain.IssueTodo)
		testkit.MustEqual(t, "wakes after reopen", len(e.wakes()), 2)

		e.setStatus(task.ID, domain.IssueCancelled)
		e.deliver(emulator.DeliverRequest{Subject: "Re: Old thread", Text: "Are you there?", InReplyTo: reply.MessageID})
		e.settled(4)
		testkit.MustEqual(t, "retained on cancelled task", len(e.messages(task.ID)), 4)
		testkit.MustEqual(t, "wakes after cancelled", len(e.wakes()), 2)
		got, _ = e.Store.GetIssue(context.Background(), e.Store.DB, task.ID)
		testkit.MustEqual(t, "cancelled stays", got.Status, domain.IssueCancelled)
		testkit.MustEqual(t, "tasks", len(e.tasks()), 1)
	})
}

// Provider spam never
// starts work; automatic mail (Auto-Submitted, a DSN bounce from
// mailer-daemon) never creates a task, and in an existing conversation it is
// retained without a wake or a reopen; Markdown images in mail are escaped
// so they cannot render, in exactly one comment.
func TestFilteredAndAutomaticMail(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := newEnv(t, url, "filters", nil)
		e.waitSocket()
		e.deliver(emulator.DeliverRequest{Subject: "Cheap pills", Text: "spam", Headers: map[string]string{"X-Spam-Flag": "YES"}})
		auto := e.deliver(emulator.DeliverRequest{Subject: "Out of office", Text: "I am away",
			Headers: map[string]string{"Auto-Submitted": "auto-replied"}})
		e.deliver(emulator.DeliverRequest{From: "MAILER-DAEMON@mx.example.com", Subject: "Undelivered Mail Returned to Sender",
			Text: "Delivery failed", Headers: map[string]string{"Content-Type": "multipart/report; report-type=delivery-status"}})
		real := e.deliver(emulator.DeliverRequest{Subject: "Tracking", Text: "Look ![tracker](https://evil.example/p.png) here"})
		e.settled(3) // the spam event is not a channel event: never admitted
		testkit.MustEqual(t, "auto-reply delivery", e.delivery(auto.MessageID).State, domain.DeliveryFiltered)
		tasks := e.tasks()
		testkit.MustEqual(t, "tasks", len(tasks), 1)
		task := tasks[0]
		cs := e.comments(task.ID)
		testkit.MustEqual(t, "comments", len(cs), 1)
		if !strings.Contains(cs[0].Body, `\!\[tracker\]\(https://evil.example/p.png\)`) || cs[0].AuthorKind != "system" {
			t.Fatalf("comment not escaped: %q", cs[0].Body)
		}
		testkit.MustEqual(t, "wakes", len(e.wakes()), 1)

		// An out-of-office reply in the existing, completed conversation.
		e.setStatus(task.ID, domain.IssueDone)
		e.deliver(emulator.DeliverRequest{Subject: "Re: Tracking", Text: "Away until Monday", InReplyTo: real.MessageID,
			Headers: map[string]string{"X-Autoreply": "yes", "Precedence": "bulk"}})
		e.settled(4)
		msgs := e.messages(task.ID)
		if len(msgs) != 2 || !msgs[1].Automatic {
			t.Fatalf("automatic reply not retained as automatic: %+v", msgs)
		}
		got, _ := e.Store.GetIssue(context.Background(), e.Store.DB, task.ID)
		testkit.MustEqual(t, "not reopened", got.Status, domain.IssueDone)
		testkit.MustEqual(t, "no wake for automatic mail", len(e.wakes()), 1)
	})
}

// Field lesson 9: our own mail never creates or advances a task: mail from
// the inbox's own address is retained as context at most and never wakes.
// A publication header alone proves nothing (issue 9 item 16): a reply
// carrying one that names no publication of ours wakes like any reply.
func TestOwnMailNeverWakes(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := newEnv(t, url, "selfie", nil)
		e.waitSocket()
		e.deliver(emulator.DeliverRequest{From: "Me <" + e.Address + ">", Subject: "Note to self", Text: "loop?"})
		e.settled(1)
		testkit.MustEqual(t, "tasks from own address", len(e.tasks()), 0)

		first := e.deliver(emulator.DeliverRequest{Subject: "Customer", Text: "Question"})
		e.settled(2)
		e.deliver(emulator.DeliverRequest{From: e.Address, Subject: "Re: Customer", Text: "Our own copy", InReplyTo: first.MessageID})
		e.settled(3)
		testkit.MustEqual(t, "wakes before the forged header", len(e.wakes()), 1)
		e.deliver(emulator.DeliverRequest{Subject: "Re: Customer", Text: "Forged echo", InReplyTo: first.MessageID,
			Headers: map[string]string{receive.PublicationHeader: testkit.NewUUID()}})
		e.settled(4)
		tasks := e.tasks()
		testkit.MustEqual(t, "tasks", len(tasks), 1)
		testkit.MustEqual(t, "retained", len(e.messages(tasks[0].ID)), 3)
		testkit.MustEqual(t, "wakes", len(e.wakes()), 2)
	})
}

// Issue 9 item 16: an outside sender who copies the publication id of a
// mail we really sent into X-Paperclip-Publication-Id still gets a task and
// a wake; only the provider message of that publication counts as ours,
// with the header or without it.
func TestForgedPublicationHeaderStillWakes(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := newEnv(t, url, "ours", nil)
		e.waitSocket()
		parent := testkit.ID(e.Board.JSON("POST", "/api/companies/"+e.CompanyID+"/issues", map[string]any{"title": "Outreach"}, 201))
		send := func(subject string) (key, providerID string) {
			key = testkit.NewUUID()
			e.Board.JSON("POST", "/api/companies/"+e.CompanyID+"/email/send", map[string]any{"endpointId": e.EpID, "parentIssueId": parent,
				"to": []string{"jane@example.com"}, "subject": subject, "text": "Hi", "idempotencyKey": key}, 202)
			testkit.Eventually(t, wait, "the send to be accepted by the provider", func() bool {
				d := e.Board.JSON("GET", "/api/companies/"+e.CompanyID+"/email/deliveries/"+key, nil, 200)
				providerID, _ = d["providerMessageId"].(string)
				return providerID != ""
			})
			return key, providerID
		}
		key, providerID := send("Hello Jane")
		_, bareID := send("Hello again")
		// A second inbox of ours receives the mails under test.
		other := &env{EmailEnv: e.EmailEnv, t: t}
		other.connect("theirs", nil)
		testkit.Eventually(t, wait, "two sockets", func() bool { return e.Em.WebSocketCount() == 2 })
		tasks0, wakes0 := len(e.tasks()), len(e.wakes())

		other.deliver(emulator.DeliverRequest{From: "Jane <jane@example.com>", Subject: "Please act", Text: "Do it",
			Headers: map[string]string{receive.PublicationHeader: key}})
		other.settled(1)
		testkit.MustEqual(t, "a task for the forged header", len(e.tasks()), tasks0+1)
		testkit.MustEqual(t, "a wake for the forged header", len(e.wakes()), wakes0+1)

		// The genuine provider message of our publication is ours.
		other.deliver(emulator.DeliverRequest{From: "Ours <" + e.Address + ">", Subject: "Hello Jane", Text: "Hi", MessageID: providerID,
			Headers: map[string]string{receive.PublicationHeader: key}})
		other.settled(2)
		testkit.MustEqual(t, "no task for our own message", len(e.tasks()), tasks0+1)
		testkit.MustEqual(t, "no wake for our own message", len(e.wakes()), wakes0+1)

		// Without the header (a relay dropped it), the provider message id
		// of our publication still identifies it.
		other.deliver(emulator.DeliverRequest{From: "Ours <" + e.Address + ">", Subject: "Hello again", Text: "Hi", MessageID: bareID})
		other.settled(3)
		testkit.MustEqual(t, "no task for our own message without the header", len(e.tasks()), tasks0+1)
		testkit.MustEqual(t, "no wake for our own message without the header", len(e.wakes()), wakes0+1)
	})
}

// Field lesson 14: the same mail delivered to two connected inboxes is two
// independent tasks (deduplication is per inbox, not per Message-ID).
func TestSameMailToTwoInboxesIsTwoTasks(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := newEnv(t, url, "alpha", nil)
		alpha := e.Address
		e2 := &env{EmailEnv: e.EmailEnv, t: t}
		e2.connect("beta", nil)
		raw := "From: Jane <jane@example.com>\r\nTo: " + alpha + ", " + e2.Address + "\r\nSubject: Both of you\r\n" +
			"Message-ID: <both@example.com>\r\nDate: Mon, 02 Jan 2026 10:00:00 +0000\r\n\r\nOne mail, two inboxes.\r\n"
		testkit.Eventually(t, wait, "two sockets", func() bool { return e.Em.WebSocketCount() == 2 })
		if _, err := e.Em.DeliverRaw([]string{alpha, e2.Address}, []byte(raw)); err != nil {
			t.Fatal(err)
		}
		e.settled(1)
		e2.settled(1)
		testkit.MustEqual(t, "tasks", len(e.tasks()), 2)
		testkit.MustEqual(t, "wakes", len(e.wakes()), 2)
	})
}

// A low-trust agent's inbound task
// lands inside its boundary project and requests an isolated workspace.
func TestLowTrustTaskPlacement(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := newEnv(t, url, "", nil)
		e.Board.JSON("PATCH", "/api/instance/settings", map[string]any{"experimental": map[string]any{
			"enableChatConnectors": true, "enableIsolatedWorkspaces": true}}, 200)
		proj := testkit.ID(e.Board.JSON("POST", "/api/companies/"+e.CompanyID+"/projects", map[string]any{"name": "Mail"}, 201))
		envID := testkit.ID(e.Board.JSON("POST", "/api/companies/"+e.CompanyID+"/environments",
			map[string]any{"name": "Sandbox", "driver": "sandbox", "provider": "bubblewrap"}, 201))
		e.AgentID = testkit.ID(e.Board.JSON("POST", "/api/companies/"+e.CompanyID+"/agents", map[string]any{
			"name": "Careful", "adapterType": "process", "adapterConfig": map[string]any{"command": "/bin/true"},
			"environmentId": envID, "permissions": map[string]any{"trustPreset": "low_trust_review",
				"authorizationPolicy": map[string]any{"trustBoundary": map[string]any{"projectIds": []string{proj}}}}}, 201))
		e.connect("careful", nil)
		e.waitSocket()
		e.deliver(emulator.DeliverRequest{Subject: "Untrusted", Text: "hello"})
		e.settled(1)
		task := e.tasks()[0]
		testkit.MustEqual(t, "project", task.ProjectID, proj)
		var ws map[string]any
		_ = json.Unmarshal(task.ExecutionWorkspaceSettings, &ws)
		testkit.MustEqual(t, "workspace mode", ws["mode"], any("isolated_workspace"))
		testkit.MustEqual(t, "wakes", len(e.wakes()), 1)
	})
}
