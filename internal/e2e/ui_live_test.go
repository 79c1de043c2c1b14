package e2e_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/config"
	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/emulator"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// TestUILiveListsArePushed: mail that arrives while the Email page and the
// task list are open appears in them without a reload, pushed by the
// server's event stream. The UI's poll interval is two minutes here, so
// only the push can show the mail within the wait's bound; the wait is a
// generous wait-until-visible (the push normally takes well under 2 s),
// never a timing assertion.
func TestUILiveListsArePushed(t *testing.T) {
	t.Parallel()
	dbtest.EachURL(t, func(t *testing.T, dialect db.Dialect, dbURL string) {
		t.Parallel()
		em, err := emulator.Start(context.Background(), emulator.Options{DeliveryDelay: -1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = em.Close() })
		cfg := testkit.EmailConfig(testkit.Config(t, dbURL), em)
		cfg.DeploymentMode = config.ModeLocalTrusted
		cfg.UIPollMS = 120000
		inst := testkit.Start(t, cfg)
		api := testkit.NewClient(t, inst.URL())
		api.JSON("PATCH", "/api/instance/settings", map[string]any{"experimental": map[string]any{"enableChatConnectors": true}}, 200)
		cid := testkit.ID(api.JSON("POST", "/api/companies", map[string]any{"name": "Live"}, 201))
		aid := testkit.ID(api.JSON("POST", "/api/companies/"+cid+"/agents", map[string]any{"name": "Mail Assistant", "adapterType": "process",
			"adapterConfig": map[string]any{"command": "/bin/true"}}, 201))
		_, key := em.CreateOrganization("Live Mail")
		eid := testkit.ID(api.JSON("POST", "/api/companies/"+cid+"/email/inboxes", map[string]any{"assignedAgentId": aid,
			"apiKey": key, "username": "live", "idempotencyKey": testkit.NewUUID()}, 201))
		testkit.Eventually(t, 30*time.Second, "the activation catch-up", func() bool {
			return api.JSON("GET", "/api/email/inboxes/"+eid, nil, 200)["lastSyncAt"] != nil
		})
		const bound = 30 * time.Second // far below the 120 s poll interval
		b := newBrowser(t, inst.URL(), 1280, 900)

		b.visit("/c/" + cid + "/email")
		b.waitText("main", "No email yet.", 5*time.Second)
		eval[bool](b, `window.__pcNoReload = true`)
		sent := time.Now()
		if _, err := em.Deliver("live@agentmail.to", emulator.DeliverRequest{From: "Ada <ada@example.com>", Subject: "Pushed to the list",
			Text: "Does this show up by itself?"}); err != nil {
			t.Fatal(err)
		}
		b.eventually("the new mail in the open Email page", bound, func() bool {
			return strings.Contains(b.text("#conversation-list-region"), "Pushed to the list")
		})
		// Measured, not asserted (docs/testing.md, "Failures and flakes"): the
		// figure is for the reader of the log; issue 33 wants it under 2 s.
		t.Logf("mail → visible in the open Email page: %s", time.Since(sent).Round(10*time.Millisecond))

		b.visit("/c/" + cid + "/tasks")
		eval[bool](b, `window.__pcNoReload = true`)
		sent = time.Now()
		if _, err := em.Deliver("live@agentmail.to", emulator.DeliverRequest{From: "Bea <bea@example.com>", Subject: "Pushed to the tasks",
			Text: "And here?"}); err != nil {
			t.Fatal(err)
		}
		b.eventually("the new mail's task in the open task list", bound, func() bool {
			return strings.Contains(b.text("#task-list-region"), "Pushed to the tasks")
		})
		t.Logf("mail → its task visible in the open task list: %s", time.Since(sent).Round(10*time.Millisecond))
		if !eval[bool](b, `window.__pcNoReload === true`) {
			t.Fatal("the page reloaded")
		}

		// Keyboard: ? lists the shortcuts, j/k move in the list, c starts a task.
		b.key("?")
		b.eventually("the shortcuts dialog", 5*time.Second, func() bool { return eval[bool](b, `document.querySelector("#shortcuts").open`) })
		b.key("?")
		b.key("j")
		b.key("j")
		b.key("k")
		if got := eval[string](b, `document.activeElement.closest("tr") ? document.activeElement.closest("tr").dataset.taskId : ""`); got == "" ||
			got != eval[string](b, `document.querySelector("#task-list tbody tr").dataset.taskId`) {
			t.Errorf("j j k does not land on the first task: %q", got)
		}
		b.key("c")
		b.waitPath("/c/"+cid+"/tasks/new", 10*time.Second)

		// The Email page with its two conversations for docs/ui.md
		// ("Screenshots"), on a desktop and a phone.
		if shots := screenshotDir(dialect); shots != "" {
			b.visit("/c/" + cid + "/email")
			b.screenshot(shots, "email-desktop")
			phone := newBrowser(t, inst.URL(), 390, 844)
			phone.visit("/c/" + cid + "/email")
			phone.screenshot(shots, "email-phone")
		}
	})
}
