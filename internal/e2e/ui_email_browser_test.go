package e2e_test

import (
	"context"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/apiclient"
	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/emulator"
	"github.com/paperclipai/paperclipai/internal/outbound"
	"github.com/paperclipai/paperclipai/internal/store"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

const readyH1 = "Your agent’s email is ready"

var setupRe = regexp.MustCompile(`/setup/([0-9a-f-]{36})\?`)

// TestUIEmailJourney (J1) is a new operator's first email session, all in
// the browser: turn email on, create an agent, connect AgentMail with the
// emulator's key, give the agent an address in the wizard, receive an
// email and watch the task and the agent's delivered reply appear, then
// pause, resume and disconnect the inbox.
func TestUIEmailJourney(t *testing.T) {
	t.Parallel()
	dbtest.EachURL(t, func(t *testing.T, dialect db.Dialect, dbURL string) {
		t.Parallel()
		e := startEmailUI(t, dbURL, 1500*time.Millisecond)
		api := e.api
		b := newBrowser(t, e.inst.URL(), 1280, 900)
		b.allowClipboard()
		shots := screenshotDir(dialect)

		// 1. A company.
		b.visit("/")
		b.fill("#company-name", "Acme")
		b.submit("form[action='/companies'] button[type=submit]")
		cid := strings.TrimPrefix(b.path(), "/c/")
		if !store.ValidID(cid) {
			t.Fatalf("after creating a company: %s", b.path())
		}
		c := "/c/" + cid

		// 2. Email is off until an administrator turns it on.
		b.visit(c + "/apps")
		b.waitText("main", "Email connections are experimental and turned off.", 5*time.Second)
		b.submit("#enable-email")
		b.waitText("#agentmail-card", "Connect AgentMail", 5*time.Second)

		// 3. The agent.
		b.visit(c + "/agents/new")
		b.fill("#agent-name", "Mail Assistant")
		b.fill("#agent-command", testkit.Binary(t))
		b.fill("#agent-args", "example-agent\nautoreply")
		b.fill("#agent-timeout", "120")
		b.submit("main form button[type=submit]")
		b.waitText("main", "No email address yet.", 5*time.Second)
		b.waitText("main", "Standard", 5*time.Second)
		aid := strings.TrimPrefix(b.path(), c+"/agents/")

		// 4. Connect AgentMail: Access, API key, Connected.
		b.visit(c + "/apps")
		b.submit("#agentmail-card a.btn-primary")
		b.waitText("h1", "Connect AgentMail", 5*time.Second)
		if !b.checked("#grant-organization") || !b.checked("#agents-specific") {
			t.Fatal("access defaults: organization grant and specific agents")
		}
		if !b.checked("#agent-" + aid) {
			b.click("#agent-" + aid)
		}
		b.screenshot(shots, "email-connect-desktop")
		b.submit("#access-continue")
		b.waitText("h2", "Add your AgentMail API key", 5*time.Second)
		b.screenshot(shots, "email-connect-key-desktop")
		b.fill("#api-key", e.orgKey)
		b.submit("#connect-submit")
		b.waitText("h2", "AgentMail is connected", 5*time.Second)
		if strings.Contains(b.html(), e.orgKey) || strings.Contains(b.path(), e.orgKey) {
			t.Fatal("the API key is in the page")
		}
		b.waitText("main", "Any human in the organization", 5*time.Second)
		b.waitText("main", "Mail Assistant", 5*time.Second)
		conns := api.List("/api/companies/" + cid + "/email/connections")
		if len(conns) != 1 {
			t.Fatalf("connections: %v", conns)
		}
		conn := conns[0]["id"].(string)

		// 5. Permissions, then the wizard; its request id is in the URL.
		b.submit("#open-permissions")
		b.waitText("main", "Your connection is ready. Give an agent an inbox.", 5*time.Second)
		b.submit("#give-address")
		m := setupRe.FindStringSubmatch(b.path())
		if m == nil || !strings.Contains(b.path(), "step=agent") {
			t.Fatalf("wizard URL: %s", b.path())
		}
		rid := m[1]

		// 6. Step 1: agent and saved credential.
		b.fill("#email-agent", aid)
		b.waitText("#agent-notes", "Mail Assistant is not a low-trust agent", 5*time.Second)
		if v := b.value("#email-credential"); v != conn {
			t.Fatalf("credential preselected: %q, want %q", v, conn)
		}
		b.screenshot(shots, "email-wizard-agent-desktop")
		b.submit("#step-agent-continue")

		// 7. Step 2: the suggested address and the check (never "free").
		b.waitText("h2", "Choose Mail Assistant’s email address", 5*time.Second)
		if v := b.value("#email-name"); v != "mail-assistant" {
			t.Fatalf("suggested username: %q", v)
		}
		b.waitText("#email-address-status", "AgentMail confirms availability when you create the address.", 5*time.Second)
		b.fill("#email-name", "support")
		b.eventually("the check of support@agentmail.to", 10*time.Second, func() bool {
			return b.attr("#address-check", "data-address") == "support@agentmail.to" && b.attr("#address-check", "data-status") == "unknown"
		})
		b.waitText("#email-address-status", "AgentMail confirms availability when you create the address.", 5*time.Second)
		if strings.Contains(b.text("main"), "is available") {
			t.Fatal("the address check says an address is available")
		}
		b.openDetails("#advanced-options")
		if !b.checked("#receive-websocket") {
			t.Fatal("Live connection is not the default")
		}
		b.screenshot(shots, "email-wizard-address-desktop")
		b.submit("#step-address-continue")

		// 8. Step 3: review and create; the button shows its busy state.
		b.waitText("#review-address", "support@agentmail.to", 5*time.Second)
		for _, want := range []string{"Live connection", "Standard", "Anyone can email an unrestricted inbox"} {
			b.waitText("main", want, 5*time.Second)
		}
		b.screenshot(shots, "email-wizard-review-desktop")
		// Slow the provider down so the busy state is observable.
		slow := e.em.AddFault(emulator.Fault{Match: emulator.FaultMatch{Operation: "create_inbox"}, DelayMS: 1500, Times: 1})
		// The page records its own busy state (evaluations wait for the
		// next document while the form submits, so polling could miss it).
		eval[bool](b, `(() => { const x = document.querySelector("#create-address");
			new MutationObserver(() => { if (x.disabled && x.textContent.includes("Connecting…")) sessionStorage.setItem("pcBusySeen", "1"); })
				.observe(x, {attributes: true, childList: true, subtree: true, characterData: true}); return true; })()`)
		b.click("#create-address")
		b.waitPath(c+"/apps/agentmail/setup/"+rid+"/done", 30*time.Second)
		_ = e.em.RemoveFault(slow)
		b.checkPage()
		b.waitText("h1", readyH1, 5*time.Second)
		if eval[string](b, `sessionStorage.getItem("pcBusySeen") || ""`) != "1" {
			t.Fatal("the create button never showed Connecting… while disabled")
		}
		if got := api.JSON("GET", "/api/email/inboxes/"+rid, nil, 200); got["status"] != "active" || got["address"] != "support@agentmail.to" {
			t.Fatalf("the endpoint is not the request id: %v", got)
		}
		b.screenshot(shots, "email-wizard-ready-desktop")

		// 9. Copy the address; the inbox settings go live.
		b.click("#copy-address")
		b.waitText(".copy-status", "Copied!", 5*time.Second)
		b.submit("#open-settings")
		b.waitText("h1", "support@agentmail.to", 5*time.Second)
		b.waitText("#inbox-status .badge", "Receiving email", 5*time.Second)
		b.waitText("#inbox-status", "Live connection", 5*time.Second)
		b.eventually("the first mail check", 20*time.Second, func() bool {
			txt := b.text("#last-mail-check")
			return txt != "" && txt != "Not checked yet"
		})
		b.screenshot(shots, "email-inbox-desktop")
		emailPhonePages(t, b.base, shots, c, cid, aid, conn, rid)

		// 10. An email arrives; the task appears without a reload.
		b.visit(c + "/tasks")
		eval[bool](b, `window.__pcNoReload = true`)
		if _, err := e.em.Deliver("support@agentmail.to", emulator.DeliverRequest{From: "Jane <jane@example.com>", Subject: "Delivery date?",
			Text: "Can you confirm Friday delivery?\n\nOn Mon, Bob wrote:\n> Earlier thread text"}); err != nil {
			t.Fatal(err)
		}
		b.eventually("the email task in the list", 20*time.Second, func() bool {
			return strings.Contains(b.text("#task-list"), "Delivery date?")
		})
		if !eval[bool](b, `window.__pcNoReload === true`) {
			t.Fatal("the task list reloaded")
		}
		tid := eval[string](b, `[...document.querySelectorAll("#task-list tr[data-task-id]")].find(r => r.innerText.includes("Delivery date?")).dataset.taskId`)

		// 11–12. The task, the agent's run and its reply, delivered.
		b.visit(c + "/tasks/" + tid)
		b.waitText("h1", "Delivery date?", 5*time.Second)
		in := `#task-timeline article[aria-label="Email received"]`
		b.waitText(in, "Jane <jane@example.com>", 10*time.Second)
		for _, want := range []string{"External", "To: support@agentmail.to", "Can you confirm Friday delivery?"} {
			b.waitText(in, want, 5*time.Second)
		}
		for _, hidden := range []string{"Earlier thread text", "Bcc:", "Message ID:"} {
			if strings.Contains(b.text(in), hidden) {
				t.Errorf("%q is visible before it is asked for", hidden)
			}
		}
		b.openDetails(in + " details.email-fulltext")
		b.waitText(in, "Earlier thread text", 5*time.Second)
		b.openDetails(in + " details.email-details")
		b.waitText(in, "Message ID:", 5*time.Second)
		out := `#task-timeline article[aria-label="Email sent"]`
		b.eventually("the reply's card to show Delivered", 60*time.Second, func() bool {
			return b.exists(out) && strings.Contains(b.text(out+" .email-outcome"), "Delivered")
		})
		b.waitText(out, "Thanks for your email about", 5*time.Second)
		b.eventually("the agent's run to succeed", 60*time.Second, func() bool {
			return b.exists(`#task-runs .run-row[data-status="succeeded"]`)
		})
		b.waitText("#task-runs", "Email received", 5*time.Second)
		thread := waitDelivered(t, api, cid, tid, 1)
		if len(thread.Messages) < 2 {
			t.Fatalf("thread: %v", thread)
		}
		outbox := e.em.Outbox("jane@example.com", "")
		if len(outbox) != 1 || outbox[0].InReplyTo == "" || !strings.Contains(outbox[0].Text, "Thanks for your email about") {
			t.Fatalf("outbox: %+v", outbox)
		}
		for _, absent := range []string{"Email reply", "Internal comment", "Start email child task"} {
			if strings.Contains(b.text("main"), absent) {
				t.Errorf("the task page offers %q", absent)
			}
		}

		// 13. A comment wakes the agent but never sends email.
		b.fill("#comment-body", "Please also confirm the invoice.")
		if !b.checked("#comment-wake") {
			t.Fatal("Also wake is not ticked")
		}
		b.submit("#comment-form button[type=submit]")
		b.waitText("#task-timeline", "Local board", 5*time.Second)
		b.eventually("the comment's run to succeed", 60*time.Second, func() bool {
			return eval[int](b, `document.querySelectorAll('#task-runs .run-row[data-status="succeeded"]').length`) == 2
		})
		if out := e.em.Outbox("jane@example.com", ""); len(out) != 1 {
			t.Fatalf("a comment sent email: %d messages", len(out))
		}
		if pubs := api.JSON("GET", "/api/companies/"+cid+"/email/tasks/"+tid, nil, 200)["publications"].([]any); len(pubs) != 1 {
			t.Fatalf("a comment made a send: %v", pubs)
		}

		// 14. Pause: mail waits; resume: it arrives (catch-up).
		settings := c + "/apps/agentmail/inboxes/" + rid + "/settings"
		b.visit(settings)
		b.submit("#pause")
		b.waitText("#inbox-status .badge", "Paused", 5*time.Second)
		b.waitText("#inbox-status", "Receiving is paused. Resume to receive new email.", 5*time.Second)
		b.eventually("no live socket while paused", 10*time.Second, func() bool { return e.em.SubscribedCount("support@agentmail.to") == 0 })
		if _, err := e.em.Deliver("support@agentmail.to", emulator.DeliverRequest{From: "Jane <jane@example.com>", Subject: "While paused",
			Text: "Anyone there?"}); err != nil {
			t.Fatal(err)
		}
		if findTask(api, cid, "While paused") != "" {
			t.Fatal("a paused inbox made a task")
		}
		b.submit("#resume")
		b.waitText("#inbox-status .badge", "Receiving email", 5*time.Second)
		var paused string
		b.eventually("the task of the mail sent while paused", 30*time.Second, func() bool {
			paused = findTask(api, cid, "While paused")
			return paused != ""
		})

		// 15. Disconnect once the reply is delivered (a send in flight holds
		// the thread; the page would offer Try again).
		waitDelivered(t, api, cid, paused, 1)
		b.visit(settings)
		b.submit("#disconnect")
		b.waitText("h1", "Disconnect support@agentmail.to?", 5*time.Second)
		b.submit("#disconnect-confirm")
		for b.exists("#try-again") {
			b.submit("#try-again")
		}
		b.waitText(".flash", "Inbox disconnected. Email history remains in its tasks.", 5*time.Second)
		b.visit(c + "/apps/agentmail")
		b.waitText("#archived-inboxes summary", "Disconnected (1)", 5*time.Second)
		b.visit(c + "/tasks/" + tid)
		b.waitText("h1", "Delivery date?", 5*time.Second)
		if th := api.JSON("GET", "/api/companies/"+cid+"/email/tasks/"+tid, nil, 200); len(th["messages"].([]any)) < 2 {
			t.Fatalf("email history after disconnect: %v", th)
		}
		if _, err := e.provider(e.orgKey).GetInbox(context.Background(), "support@agentmail.to"); err != nil {
			t.Fatalf("the inbox was removed from AgentMail: %v", err)
		}
		deleted := false
		for _, r := range e.em.Requests("/v0/inboxes/support@agentmail.to/api-keys/") {
			deleted = deleted || r.Method == "DELETE"
		}
		if !deleted {
			t.Fatal("Paperclip's runtime key was not removed")
		}
	})
}

// findTask returns the id of the company's task titled title, or "".
func findTask(api *testkit.Client, cid, title string) string {
	tasks := testkit.Must(api.API().Issues(cid).All(context.Background(), apiclient.Query("originKind", "chat_channel")))(api.T, "tasks")
	for _, is := range tasks {
		if is.Title == title {
			return is.ID
		}
	}
	return ""
}

// waitDelivered waits until the task's email thread has n sends, all
// delivered, and returns the thread.
func waitDelivered(t *testing.T, api *testkit.Client, cid, tid string, n int) *outbound.ThreadSummary {
	t.Helper()
	var th *outbound.ThreadSummary
	testkit.Eventually(t, 60*time.Second, "the reply to be delivered", func() bool {
		th = testkit.Must(api.API().Thread(context.Background(), cid, tid))(t, "the task's thread")
		if th == nil || len(th.Publications) != n {
			return false
		}
		for _, p := range th.Publications {
			if p.Outcome != "delivered" {
				return false
			}
		}
		return true
	})
	return th
}

// emailPhonePages opens the email pages on a 390 px wide phone: none may
// be wider than the screen (a wide table scrolls inside its card, a header
// wraps). With dir set it also captures them, and the AgentMail page on a
// desktop, for docs/ui.md.
func emailPhonePages(t *testing.T, base, dir, c, cid, aid, conn, rid string) {
	phone := newBrowser(t, base, 390, 844)
	state := url.Values{"agent": {aid}, "connection": {conn}}
	fresh := c + "/apps/agentmail/setup/" + testkit.NewUUID()
	pages := []struct{ name, path string }{
		{"email-agentmail", c + "/apps/agentmail"},
		{"email-connect", c + "/apps/agentmail/connect"},
		{"email-wizard-agent", fresh + "?step=agent&" + state.Encode()},
		{"email-wizard-address", fresh + "?step=address&" + state.Encode()},
		{"email-wizard-review", fresh + "?step=review&username=sales&" + state.Encode()},
		{"email-wizard-ready", c + "/apps/agentmail/setup/" + rid + "/done"},
		{"email-inbox", c + "/apps/agentmail/inboxes/" + rid + "/settings"},
	}
	for _, p := range pages {
		phone.visit(p.path)
		if eval[bool](phone, `document.documentElement.scrollWidth > document.documentElement.clientWidth`) {
			t.Errorf("%s is wider than a phone's screen: %s px", p.name,
				eval[string](phone, `document.documentElement.scrollWidth + " > " + document.documentElement.clientWidth`))
		}
		phone.screenshot(dir, p.name+"-phone")
	}
	if dir == "" {
		return
	}
	b := newBrowser(t, base, 1280, 900)
	b.visit(c + "/apps/agentmail")
	b.screenshot(dir, "email-agentmail-desktop")
}
