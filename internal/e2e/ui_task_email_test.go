package e2e_test

import (
	"context"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/config"
	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/emulator"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// mailUIEnv is a local_trusted server with fast UI polling, an in-process
// emulator whose delivery receipts lag 1.5 s (so "Sent" is observable
// before "Delivered"), and an active inbox support@agentmail.to assigned
// to "Mail Assistant". Its database is dbURL's (testkit.Config: "" is
// SQLite).
type mailUIEnv struct {
	inst          *testkit.Instance
	em            *emulator.Server
	api           *testkit.Client
	cid, aid, eid string
}

func startMailUIServer(t *testing.T, dbURL string) *mailUIEnv {
	t.Helper()
	em, err := emulator.Start(context.Background(), emulator.Options{DeliveryDelay: 1500 * time.Millisecond})
	if err != nil {
		t.Fatalf("start emulator: %v", err)
	}
	t.Cleanup(func() { _ = em.Close() })
	cfg := testkit.EmailConfig(testkit.Config(t, dbURL), em)
	cfg.DeploymentMode = config.ModeLocalTrusted
	cfg.UIPollMS = 400
	cfg.AgentMailTimeout = 3 * time.Second
	inst := testkit.Start(t, cfg)
	api := testkit.NewClient(t, inst.URL())
	api.JSON("PATCH", "/api/instance/settings", map[string]any{"experimental": map[string]any{"enableChatConnectors": true}}, 200)
	e := &mailUIEnv{inst: inst, em: em, api: api}
	e.cid = testkit.ID(api.JSON("POST", "/api/companies", map[string]any{"name": "Acme"}, 201))
	// The agent does nothing until the test makes it the autoreply agent,
	// so the page can be open before the reply exists.
	e.aid = testkit.ID(api.JSON("POST", "/api/companies/"+e.cid+"/agents", map[string]any{"name": "Mail Assistant", "adapterType": "process",
		"adapterConfig": map[string]any{"command": "/bin/true"}}, 201))
	_, orgKey := em.CreateOrganization("Acme Mail")
	e.eid = testkit.ID(api.JSON("POST", "/api/companies/"+e.cid+"/email/inboxes", map[string]any{"assignedAgentId": e.aid,
		"apiKey": orgKey, "username": "support", "idempotencyKey": testkit.NewUUID()}, 201))
	testkit.Eventually(t, 30*time.Second, "the activation catch-up", func() bool {
		return api.JSON("GET", "/api/email/inboxes/"+e.eid, nil, 200)["lastSyncAt"] != nil
	})
	return e
}

// task waits for the task titled title.
func (e *mailUIEnv) task(t *testing.T, title string) string {
	t.Helper()
	var id string
	testkit.Eventually(t, 30*time.Second, "task "+title, func() bool {
		for _, is := range e.api.List("/api/companies/" + e.cid + "/issues") {
			if is["title"] == title {
				id = is["id"].(string)
			}
		}
		return id != ""
	})
	return id
}

// wakeAutoreply makes the agent the built-in autoreply agent and wakes it
// on task.
func (e *mailUIEnv) wakeAutoreply(t *testing.T, task string) {
	t.Helper()
	e.api.JSON("PATCH", "/api/agents/"+e.aid, map[string]any{"adapterConfig": map[string]any{
		"command": testkit.Binary(t), "args": []string{"example-agent", "autoreply"}, "timeoutSec": 60}}, 200)
	e.api.JSON("POST", "/api/agents/"+e.aid+"/wakeup", map[string]any{"reason": "manual", "issueId": task}, 202)
}

// TestUITaskEmail is the task email view in the browser, on one server:
// a received email and the agent's reply appear as cards, the reply's
// outcome moves Queued → Sent → Delivered without a reload, the full text
// and the email details open on demand; an email full of markup and
// tracking pixels shows as text and loads nothing; an uncertain send is
// resolved as not sent by the operator.
func TestUITaskEmail(t *testing.T) {
	t.Parallel()
	dbtest.EachURL(t, func(t *testing.T, dialect db.Dialect, dbURL string) {
		t.Parallel()
		e := startMailUIServer(t, dbURL)
		var pixelHits atomic.Int64
		pixel := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			pixelHits.Add(1)
			w.Header().Set("Content-Type", "image/png")
		}))
		defer pixel.Close()
		shots := screenshotDir(dialect)
		c := "/c/" + e.cid

		// Two emails arrive: an ordinary question, and one full of markup and
		// remote images.
		if _, err := e.em.Deliver("support@agentmail.to", emulator.DeliverRequest{From: "Jane <jane@example.com>", Cc: []string{"ops@example.com"},
			Subject: "Delivery date?", Text: "Can you confirm Friday delivery?\n\nOn Mon, Bob wrote:\n> Earlier thread text",
			Attachments: []emulator.DeliverAttachment{
				{Filename: "delivery-note.pdf", ContentType: "application/pdf", ContentBase64: base64.StdEncoding.EncodeToString([]byte("%PDF-1.4\n%%EOF\n"))},
				{Filename: "pallet.png", ContentType: "image/png", ContentBase64: base64.StdEncoding.EncodeToString([]byte("\x89PNG\r\n\x1a\nnot really"))},
			}}); err != nil {
			t.Fatal(err)
		}
		const evilSubject = `<script>alert(1)</script>`
		evilText := "Look ![t](" + pixel.URL + "/p.png) <img src=\"" + pixel.URL + "/q.png\"> \"><svg onload=alert(2)>"
		if _, err := e.em.Deliver("support@agentmail.to", emulator.DeliverRequest{From: "Mallory <mallory@example.com>", Subject: evilSubject,
			Text: evilText, HTML: `<p>Look</p><img src="` + pixel.URL + `/h.png"><img src=x onerror="alert(3)">`}); err != nil {
			t.Fatal(err)
		}
		task := e.task(t, "Delivery date?")
		evilTask := e.task(t, evilSubject)

		// The received email's card, before any reply.
		b := newBrowser(t, e.inst.URL(), 1280, 900)
		b.visit(c + "/tasks/" + task)
		in := `#task-timeline article[aria-label="Email received"]`
		b.waitText(in, "Jane <jane@example.com>", 10*time.Second)
		for _, want := range []string{"External", "To: support@agentmail.to", "Cc: ops@example.com", "Delivery date?", "Can you confirm Friday delivery?"} {
			if !strings.Contains(b.text(in), want) {
				t.Errorf("received card lacks %q: %q", want, b.text(in))
			}
		}
		// Attachments are download links, never shown inline.
		b.waitText(in+" .email-attachments", "delivery-note.pdf · application/pdf", 10*time.Second)
		b.waitText(in+" .email-attachments", "pallet.png · image/png", 5*time.Second)
		if n := eval[int](b, `document.querySelectorAll('#task-timeline .email-attachments a[download][href*="/attachments/"]').length`); n != 2 {
			t.Errorf("%d attachment download links", n)
		}
		if n := eval[int](b, `document.querySelectorAll("main img, main iframe, main object, main embed").length`); n != 0 {
			t.Errorf("%d inline elements for attachments", n)
		}
		for _, hidden := range []string{"Earlier thread text", "Bcc:", "Message ID:"} {
			if strings.Contains(b.text(in), hidden) {
				t.Errorf("%q is visible before it is asked for", hidden)
			}
		}
		for _, bad := range []string{"Email reply", "Internal comment", "Start email child task"} {
			if strings.Contains(b.text("main"), bad) {
				t.Errorf("the task page offers %q", bad)
			}
		}
		b.waitText("#comment-hint", "Comments are internal and are never sent as email.", 5*time.Second)

		// The agent replies while the page is open: its outcome moves live.
		eval[bool](b, `window.__pcNoReload = true`)
		eval[bool](b, `(() => { window.__outcomes = []; setInterval(() => {
			for (const el of document.querySelectorAll("#task-timeline .email-outcome")) {
				const label = el.textContent.trim();
				if (window.__outcomes[window.__outcomes.length - 1] !== label) window.__outcomes.push(label);
			} }, 50); return true; })()`)
		e.wakeAutoreply(t, task)
		out := `#task-timeline article[aria-label="Email sent"]`
		b.eventually("the reply's card to show Delivered", 60*time.Second, func() bool {
			return b.exists(out) && strings.Contains(b.text(out+" .email-outcome"), "Delivered")
		})
		if !strings.Contains(b.text(out), "Thanks for your email about") || !strings.Contains(b.text(out), "<support@agentmail.to>") {
			t.Errorf("sent card: %q", b.text(out))
		}
		var seen []string
		b.eventually("the recorder to see Delivered", 5*time.Second, func() bool {
			seen = eval[[]string](b, `window.__outcomes`)
			return len(seen) > 0 && seen[len(seen)-1] == "Delivered"
		})
		order := map[string]int{"Queued": 0, "Sent": 1, "Delivered": 2}
		last := -1
		for _, s := range seen {
			i, ok := order[s]
			if !ok || i < last {
				t.Fatalf("outcomes seen out of order: %v", seen)
			}
			last = i
		}
		if len(seen) < 2 || seen[len(seen)-1] != "Delivered" || !strings.Contains(strings.Join(seen, ","), "Sent") {
			t.Fatalf("outcomes seen: %v (want Sent then Delivered)", seen)
		}
		// The agent set the task Done while the page was open: the Details
		// form follows the live header (saved unchanged, a stale "To do"
		// would set the status back).
		testkit.Eventually(t, 30*time.Second, "the answered task done", func() bool {
			return e.api.JSON("GET", "/api/issues/"+task, nil, 200)["status"] == "done"
		})
		b.eventually("the Details status to show Done", 10*time.Second, func() bool { return b.value("#detail-status") == "done" })
		if !eval[bool](b, `window.__pcNoReload === true`) {
			t.Fatal("the task page reloaded")
		}
		if n := len(e.em.Outbox("jane@example.com", "")); n != 1 {
			t.Fatalf("jane got %d emails", n)
		}
		// On demand: the quoted history and the envelope details.
		b.openDetails(in + " details.email-fulltext")
		b.waitText(in, "Earlier thread text", 5*time.Second)
		b.waitText(in+" .email-fulltext summary", "Hide full email", 5*time.Second)
		b.openDetails(in + " details.email-details")
		b.waitText(in+" .email-details", "Message ID:", 5*time.Second)
		// Disclosures stay open across live refreshes (a comment from elsewhere
		// changes the region).
		e.api.JSON("POST", "/api/issues/"+task+"/comments", map[string]any{"body": "Noted by the API."}, 201)
		b.waitText("#task-timeline", "Noted by the API.", 10*time.Second)
		if !strings.Contains(b.text(in), "Earlier thread text") || !strings.Contains(b.text(in), "Message ID:") {
			t.Error("a live refresh closed Show full email or Email details")
		}
		// A refresh waits while a pointer is pressed in the timeline (a swap
		// between press and release would swallow the click), and lands on
		// the release.
		fetches := `performance.getEntriesByType("resource").filter(e => e.name.includes("fragment=task-timeline")).length`
		n0 := eval[int](b, fetches)
		eval[bool](b, `document.querySelector('`+in+` .email-fulltext summary').dispatchEvent(new PointerEvent("pointerdown", {bubbles: true})); true`)
		e.api.JSON("POST", "/api/issues/"+task+"/comments", map[string]any{"body": "Noted while pressed."}, 201)
		b.eventually("a timeline refresh fetched while pressed", 10*time.Second, func() bool { return eval[int](b, fetches) > n0 })
		time.Sleep(300 * time.Millisecond)
		if strings.Contains(b.text("#task-timeline"), "Noted while pressed.") {
			t.Error("the timeline was replaced while a pointer was pressed in it")
		}
		eval[bool](b, `document.dispatchEvent(new PointerEvent("pointerup", {bubbles: true})); true`)
		b.waitText("#task-timeline", "Noted while pressed.", 10*time.Second)
		if shots != "" {
			b.click(in + " .email-details summary")
			eval[bool](b, `window.scrollTo(0, 0); true`)
			b.screenshot(shots, "task-email-desktop")
			phone := newBrowser(t, e.inst.URL(), 390, 844)
			phone.visit(c + "/tasks/" + task)
			phone.waitText(out+" .email-outcome", "Delivered", 10*time.Second)
			phone.screenshot(shots, "task-email-phone")
		}
		// Saving the Details form as it now stands keeps the task Done.
		b.submit(`form:has(#detail-status) button[type=submit]`)
		if got := e.api.JSON("GET", "/api/issues/"+task, nil, 200)["status"]; got != "done" {
			t.Errorf("saving the Details form unchanged set the status to %v", got)
		}
		if got := b.value("#detail-status"); got != "done" {
			t.Errorf("after saving, the Details status shows %q", got)
		}

		// Markup and tracking pixels are text; nothing remote loads.
		b.visit(c + "/tasks/" + evilTask)
		evil := `#task-timeline article[aria-label="Email received"]`
		b.waitText(evil, evilSubject, 10*time.Second)
		if got := b.text("h1"); got != evilSubject {
			t.Errorf("h1 = %q", got)
		}
		if !strings.Contains(b.text(evil), evilText) {
			t.Errorf("email text not shown literally: %q", b.text(evil))
		}
		if n := eval[int](b, `document.querySelectorAll("main img, main script, main svg, main iframe").length`); n != 0 {
			t.Errorf("%d injected elements on the email task page", n)
		}

		// An uncertain reply, resolved in the browser as not sent.
		e.em.AddFault(emulator.Fault{Match: emulator.FaultMatch{Operation: "reply_message"}, Status: 503, Code: "service_unavailable"})
		eval[bool](b, `window.__pcNoReload = true`)
		e.wakeAutoreply(t, evilTask)
		intent := `#task-timeline article[aria-label="Email send intent"]`
		// While Paperclip retries (same idempotency key) the send says so and
		// nothing is offered to resolve.
		b.eventually("the retrying send intent", 60*time.Second, func() bool {
			return b.exists(intent) && strings.Contains(b.text(intent), "Retrying · attempt ")
		})
		if b.exists(intent + " details.resolve") {
			t.Error("resolution is offered while Paperclip still retries")
		}
		// Retries stop (the confirmation window passes): now it is uncertain.
		testkit.ExpireSend(t, e.inst, b.attr(intent, "data-publication-id"))
		b.eventually("the uncertain send intent", 30*time.Second, func() bool {
			return b.exists(intent) && strings.Contains(b.text(intent), "Delivery uncertain")
		})
		if !eval[bool](b, `window.__pcNoReload === true`) {
			t.Fatal("the task page reloaded")
		}
		b.waitText(intent, "Paperclip lost confirmation after sending. Check AgentMail before resolving.", 5*time.Second)
		b.waitText(intent, "Requested by Mail Assistant in run", 5*time.Second)
		pid := eval[string](b, `document.querySelector('`+intent+`').dataset.publicationId`)
		b.openDetails(intent + " details.resolve")
		b.fill("#resolve-"+pid+"-message-id", "not-a-real-id")
		b.submit("#resolve-" + pid + "-sent")
		b.waitText(intent+" [role=alert]", "The message does not match this send intent", 10*time.Second)
		if shots != "" {
			eval[bool](b, `window.scrollTo(0, 0); true`)
			b.screenshot(shots, "task-email-uncertain-desktop")
		}
		b.click("#resolve-" + pid + "-checked")
		b.submit("#resolve-" + pid + "-failed")
		b.waitText(".flash", "Delivery marked not sent. Ask the agent to send again if it is still needed.", 10*time.Second)
		b.waitText(intent, "Delivery failed", 5*time.Second)
		b.waitText(intent, "Operator confirmed that this email was not sent. A new explicit send is required.", 5*time.Second)
		if b.exists(intent + " details.resolve") {
			t.Error("the resolve form is still offered")
		}
		e.em.ClearFaults()
		if d := e.api.JSON("GET", "/api/companies/"+e.cid+"/email/deliveries/"+pid, nil, 200); d["outcome"] != "failed" || d["retrying"] != false {
			t.Errorf("resolved send: %v", d)
		}
		if n := len(e.em.Outbox("mallory@example.com", "")); n != 0 {
			t.Errorf("mallory got %d emails", n)
		}
		if n := pixelHits.Load(); n != 0 {
			t.Fatalf("the tracking pixel server got %d requests", n)
		}
	})
}
