package e2e_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/paperclipai/paperclipai/internal/agentmail"
	"github.com/paperclipai/paperclipai/internal/config"
	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/emulator"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// TestUIOperatorControls holds shut the last bugs of issue 33 ("each bug
// has a browser test") that only a browser shows, in Chromium on both
// databases, one server and company for all four:
//   - New task with an assignee and "Wake the assigned agent" left ticked
//     wakes the agent (the task page says so and the run exists); with it
//     unticked no run starts;
//   - Reconnect inbox with only another receiving mode (no new API key)
//     switches a saved connection's inbox WebSocket → webhook → WebSocket
//     and keeps its saved credential, on a server that allows plain-HTTP
//     local webhooks (the Webhook option was offered disabled there
//     although the API took it);
//   - a pushed list update (the server's event stream; the poll interval
//     is two minutes here) leaves a filter the user changed but did not
//     apply, and text half typed in the focused search box, alone;
//   - on a 390 px phone, a 120-character agent name and a 77-character
//     address as select options (New task, the task and Email filters)
//     widen no page, chosen or not.
func TestUIOperatorControls(t *testing.T) {
	t.Parallel()
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, dbURL string) {
		t.Parallel()
		em, err := emulator.Start(context.Background(), emulator.Options{DeliveryDelay: -1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = em.Close() })
		cfg := testkit.EmailConfig(testkit.Config(t, dbURL), em)
		cfg.DeploymentMode = config.ModeLocalTrusted
		cfg.UIPollMS = 120000
		cfg.AgentMailTimeout = 10 * time.Second
		// Webhooks on the emulator need the server's public URL before it
		// listens (docs/deployment.md, "Trying webhook receiving locally").
		addr := freePort(t)
		cfg.Listen, cfg.PublicURL, cfg.InsecureLocalWebhooks = addr, "http://"+addr, true
		inst := testkit.Start(t, cfg)
		api := testkit.NewClient(t, inst.URL())
		api.JSON("PATCH", "/api/instance/settings", map[string]any{"experimental": map[string]any{"enableChatConnectors": true}}, 200)
		cid := testkit.ID(api.JSON("POST", "/api/companies", map[string]any{"name": "Controls"}, 201))
		c := "/c/" + cid
		newAgent := func(name string) string {
			return testkit.ID(api.JSON("POST", "/api/companies/"+cid+"/agents", map[string]any{"name": name, "adapterType": "process",
				"adapterConfig": map[string]any{"command": "/bin/true"}}, 201))
		}
		aid := newAgent("Desk Agent")
		longName := "Agent" + strings.Repeat("W", 115)
		longAgent := newAgent(longName)
		_, key := em.CreateOrganization("Controls Mail")
		conn := testkit.ID(api.JSON("POST", "/api/companies/"+cid+"/email/connections", map[string]any{"apiKey": key,
			"grantKind": "organization", "agentIds": []string{longAgent}, "idempotencyKey": testkit.NewUUID()}, 201))
		username := "support-" + strings.Repeat("x", 56)
		address := username + "@agentmail.to"
		eid := testkit.ID(api.JSON("POST", "/api/companies/"+cid+"/email/inboxes", map[string]any{"assignedAgentId": longAgent,
			"credentialConnectionId": conn, "username": username, "idempotencyKey": testkit.NewUUID()}, 201))
		inbox := func() map[string]any { return api.JSON("GET", "/api/email/inboxes/"+eid, nil, 200) }
		testkit.Eventually(t, 30*time.Second, "the activation catch-up", func() bool { return inbox()["lastSyncAt"] != nil })

		b := newBrowser(t, inst.URL(), 1280, 900)
		run := func(name string, fn func(t *testing.T)) {
			t.Run(name, func(t *testing.T) {
				parent := b.t
				b.t = t
				defer func() { b.t = parent }()
				fn(t)
			})
		}
		runsOf := func(task string) []map[string]any {
			return api.List("/api/companies/" + cid + "/heartbeat-runs?issueId=" + task)
		}
		create := `main form[action="` + c + `/tasks"] button[type=submit]`

		run("new task wakes its assignee", func(t *testing.T) {
			b.visit(c + "/tasks/new")
			if !b.checked("#task-wake") {
				t.Fatal("Wake the assigned agent is not ticked by default")
			}
			b.fill("#task-title", "Woken from the browser")
			b.fill("#task-assignee", aid)
			b.submit(create)
			b.waitText(".flash", "Agent woken (run ", 5*time.Second)
			task := strings.TrimPrefix(b.path(), c+"/tasks/")
			runs := runsOf(task)
			if len(runs) != 1 || runs[0]["wakeReason"] != "assignment" || runs[0]["agentId"] != aid {
				t.Fatalf("the runs of the task created with Wake ticked: %v", runs)
			}
			if !b.exists(`#task-runs .run-row[data-run-id="` + testkit.ID(runs[0]) + `"]`) {
				t.Errorf("the task page does not list the run")
			}

			b.visit(c + "/tasks/new")
			b.fill("#task-title", "Left waiting")
			b.fill("#task-assignee", aid)
			b.click("#task-wake")
			if b.checked("#task-wake") {
				t.Fatal("clicking Wake the assigned agent did not untick it")
			}
			b.submit(create)
			b.waitText(".flash", "Task created.", 5*time.Second)
			if f := b.text(".flash"); strings.Contains(f, "woken") {
				t.Errorf("the flash of an unticked wake: %q", f)
			}
			if runs := runsOf(strings.TrimPrefix(b.path(), c+"/tasks/")); len(runs) != 0 {
				t.Fatalf("a task created with Wake unticked started %d runs", len(runs))
			}
		})

		run("reconnect changes only the receiving mode", func(t *testing.T) {
			settings := c + "/apps/agentmail/inboxes/" + eid + "/settings"
			webhooks := func() int {
				cl, err := agentmail.New(agentmail.Options{BaseURL: em.APIURL(), APIKey: key})
				if err != nil {
					t.Fatal(err)
				}
				l, err := cl.ListInboxWebhooks(context.Background(), address, agentmail.ListParams{Limit: 100})
				if err != nil {
					t.Fatal(err)
				}
				return len(l.Webhooks)
			}
			for _, mode := range []string{"webhook", "websocket"} {
				b.visit(settings)
				b.openDetails("#reconnect")
				if b.disabled(`#reconnect-mode option[value="` + mode + `"]`) {
					t.Fatalf("Reconnect inbox does not offer %s (the server allows local webhooks)", mode)
				}
				if b.value("#reconnect-key") != "" {
					t.Fatal("the new API key field is not empty")
				}
				b.fill("#reconnect-mode", mode)
				b.submit("#reconnect-submit")
				if b.exists(".alert-error") {
					t.Fatalf("reconnect to %s without a key: %q", mode, b.text(".alert-error"))
				}
				b.waitText(".flash", "Inbox reconnected.", 5*time.Second)
				now := inbox()
				if now["receiveMode"] != mode || now["status"] != "active" || now["credentialConnectionId"] != conn {
					t.Fatalf("after reconnecting to %s: %v", mode, now)
				}
				want := 0
				if mode == "webhook" {
					want = 1
				}
				if n := webhooks(); n != want {
					t.Errorf("after reconnecting to %s the provider has %d webhooks for the inbox", mode, n)
				}
				if got := b.value("#reconnect-mode"); got != mode {
					t.Errorf("the settings page shows receiving mode %q after reconnecting to %s", got, mode)
				}
			}
		})

		run("a push leaves what the user is doing alone", func(t *testing.T) {
			b.visit(c + "/email")
			b.fill("#email-filter-state", "replied")
			b.fill("#email-filter-inbox", eid)
			b.do("type in the search box", chromedp.SendKeys("#top-search", "half typ"))
			eval[bool](b, `window.__pcNoReload = true`)
			if _, err := em.Deliver(address, emulator.DeliverRequest{From: "Ada <ada@example.com>", Subject: "Pushed past the filters",
				Text: "Do the filters stay?"}); err != nil {
				t.Fatal(err)
			}
			b.eventually("the new mail in the open Email page", 30*time.Second, func() bool {
				return strings.Contains(b.text("#conversation-list-region"), "Pushed past the filters")
			})
			if !eval[bool](b, `window.__pcNoReload === true`) {
				t.Fatal("the page reloaded")
			}
			if s, i := b.value("#email-filter-state"), b.value("#email-filter-inbox"); s != "replied" || i != eid {
				t.Errorf("the push reset the filters the user chose: state %q, inbox %q", s, i)
			}
			if got, f := b.value("#top-search"), b.focused(); got != "half typ" || f != "#top-search" {
				t.Errorf("the push changed the search box: %q, focus on %s", got, f)
			}

			b.visit(c + "/tasks")
			b.fill("#filter-status", "done")
			b.do("focus the assignee filter", chromedp.Focus("#filter-assignee"))
			eval[bool](b, `window.__pcNoReload = true`)
			if _, err := em.Deliver(address, emulator.DeliverRequest{From: "Bea <bea@example.com>", Subject: "Pushed past the task filters",
				Text: "And here?"}); err != nil {
				t.Fatal(err)
			}
			b.eventually("the new mail's task in the open task list", 30*time.Second, func() bool {
				return strings.Contains(b.text("#task-list-region"), "Pushed past the task filters")
			})
			if !eval[bool](b, `window.__pcNoReload === true`) {
				t.Fatal("the page reloaded")
			}
			if s, f := b.value("#filter-status"), b.focused(); s != "done" || f != "#filter-assignee" {
				t.Errorf("the push changed the task filters: status %q, focus on %s", s, f)
			}
		})

		run("long labels on a phone", func(t *testing.T) {
			p := newBrowser(t, inst.URL(), 390, 844)
			// A select cannot wrap its choice: a chosen name wider than the
			// screen is cut off, which the layout check allows for these
			// two; everything else is checked, and no page may widen.
			p.allowLongChoice(longName)
			p.allowLongChoice(address)
			// Every visit checks the page with the first options chosen;
			// chosen picks the long one as a user would and checks again.
			chosen := func(sel, value string) {
				t.Helper()
				p.fill(sel, value)
				p.checkLayout()
			}
			p.visit(c + "/tasks/new")
			chosen("#task-assignee", longAgent)
			p.fill("#task-title", "For the long name")
			p.click("#task-wake")
			p.submit(create) // the task page: Wake {name}, the Details assignee
			p.waitText(".flash", "Task created.", 5*time.Second)
			p.visit(c + "/tasks")
			chosen("#filter-assignee", longAgent)
			chosen("#filter-inbox", eid)
			p.visit(c + "/email")
			if !strings.Contains(p.text("#conversation-list-region"), address) {
				t.Errorf("the Email page does not show the long address")
			}
			chosen("#email-filter-inbox", eid)
			p.visit(c + "/email?inbox=" + eid)
		})
	})
}
