package e2e_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// The review journey in the browser: a new email to a stranger appears in
// the Review queue live (and in the navigation badge), is opened, edited
// with the keyboard's e and approved, and is shown Delivered; the provider
// received the edited text.
func TestUIReviewBeforeSend(t *testing.T) {
	t.Parallel()
	dbtest.EachURL(t, func(t *testing.T, dialect db.Dialect, dbURL string) {
		t.Parallel()
		e := startEmailUI(t, dbURL, 50*time.Millisecond)
		e.api.JSON("PATCH", "/api/instance/settings", map[string]any{"experimental": map[string]any{"enableChatConnectors": true}}, 200)
		cid := testkit.ID(e.api.JSON("POST", "/api/companies", map[string]any{"name": "Review Co"}, 201))
		aid := testkit.ID(e.api.JSON("POST", "/api/companies/"+cid+"/agents", map[string]any{"name": "Mail Agent", "adapterType": "process",
			"adapterConfig": map[string]any{"command": "/bin/true"}}, 201))
		ep := testkit.ID(e.api.JSON("POST", "/api/companies/"+cid+"/email/inboxes", map[string]any{"assignedAgentId": aid, "apiKey": e.orgKey,
			"username": "reviewed", "idempotencyKey": testkit.NewUUID()}, 201))
		e.api.JSON("PUT", "/api/email/inboxes/"+ep+"/send-policy", map[string]any{"review": "new_recipients"}, 200)
		parent := testkit.ID(e.api.JSON("POST", "/api/companies/"+cid+"/issues", map[string]any{"title": "Outreach", "assigneeAgentId": aid}, 201))

		// Screenshots for docs/email-setup.md ("Review before send",
		// "Notifications") when PAPERCLIP_UI_SCREENSHOTS names a directory (on
		// SQLite only: screenshotDir).
		shots := screenshotDir(dialect)
		var hook string
		if shots != "" {
			rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
			t.Cleanup(rcv.Close)
			hook = testkit.ID(e.api.JSON("POST", "/api/companies/"+cid+"/notification-webhooks", map[string]any{"url": rcv.URL + "/paperclip",
				"events": []string{"email.review_requested", "email.send_failed"}}, 201))
		}

		b := newBrowser(t, e.inst.URL(), 1280, 900)
		if shots != "" {
			b.visit("/c/" + cid + "/apps/agentmail/inboxes/" + ep)
			b.waitText("#send-policy", "New recipients", 10*time.Second)
			b.screenshot(shots, "email-send-policy-desktop")
		}
		b.visit("/c/" + cid + "/review")
		b.waitText("#review-queue", "Nothing waits for review.", 5*time.Second)

		// A keyboard user on the sidebar's Review link keeps focus there
		// when the badge's live item is swapped (the link has no id).
		eval[bool](b, `document.querySelector("#nav-review a").focus(), true`)
		key := testkit.NewUUID()
		acc := e.api.JSON("POST", "/api/companies/"+cid+"/email/send", map[string]any{"endpointId": ep, "parentIssueId": parent,
			"to": []string{"stranger@example.com"}, "subject": "A proposal", "text": "Buy now!!!", "idempotencyKey": key}, 202)
		if acc["outcome"] != "awaiting_review" {
			t.Fatalf("the send was not held: %v", acc)
		}
		// Live: the queue and the badge update without a reload.
		b.waitText("#review-queue", "A proposal", 15*time.Second)
		b.waitText("#review-queue", "New recipient stranger@example.com", 5*time.Second)
		b.waitText("#nav-review", "1", 15*time.Second)
		if !eval[bool](b, `document.activeElement === document.querySelector("#nav-review a")`) {
			t.Errorf("the live badge swap took focus off the Review link (focus at %s)", b.focused())
		}
		b.screenshot(shots, "email-review-queue-desktop")

		b.click("#review-list a")
		b.waitText("#review-email-h", "Awaiting review", 10*time.Second)
		b.waitText("#review-to", "stranger@example.com", 5*time.Second)
		b.waitText("#review-thread", "starts the conversation", 5*time.Second)
		b.screenshot(shots, "email-review-desktop")
		// e opens the editor.
		b.do("press e", chromedp.KeyEvent("e"))
		b.eventually("the editor", 10*time.Second, func() bool { return b.exists("#review-edit-text") })
		b.fill("#review-edit-text", "Would a short call next week suit you?")
		b.submit("#review-edit-submit")

		b.eventually("the send shown Delivered", 30*time.Second, func() bool {
			b.visit("/c/" + cid + "/review/" + key)
			return strings.Contains(b.text("#review-email-h"), "Delivered")
		})
		b.waitText("#review-text", "Buy now!!!", 5*time.Second)
		msgs := e.em.Outbox("stranger@example.com", "")
		if len(msgs) != 1 || msgs[0].Text != "Would a short call next week suit you?" {
			t.Fatalf("the provider received: %+v", msgs)
		}
		b.visit("/c/" + cid + "/review")
		b.waitText("#review-queue", "Nothing waits for review.", 10*time.Second)
		if shots != "" {
			b.visit("/c/" + cid + "/notifications")
			b.waitText("#webhook-list", "/paperclip", 5*time.Second)
			b.screenshot(shots, "notifications-desktop")
			b.eventually("the review request delivered", 30*time.Second, func() bool {
				b.visit("/c/" + cid + "/notifications/" + hook)
				return strings.Contains(b.text("main"), "Delivered")
			})
			b.screenshot(shots, "notification-deliveries-desktop")
		}
	})
}
