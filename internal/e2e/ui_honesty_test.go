package e2e_test

import (
	"strings"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/emulator"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// TestUIHonestStates holds the operator-facing bugs of issue 33 shut, in
// Chromium at 1280 px and 390 px, light and dark (every visited page also
// runs the layout checks: nothing wider than the viewport, no table cut
// off on a phone, every button legible):
//   - a 600-character unbroken subject widens no page (task, run, lists);
//   - a failed run's error shows in its log view, not only in the side panel;
//   - a provider 503 reads "Retrying · attempt N · next in X s" with no
//     resolution offered; resolution appears once retries stopped;
//   - a task whose reply is still queued says "Reply pending" on the task
//     and in the lists, even when it is Done;
//   - destructive buttons ("Confirm not sent", "Disconnect inbox") are
//     legible (.btn-danger was defined twice: red text on red).
func TestUIHonestStates(t *testing.T) {
	t.Parallel()
	dbtest.EachURL(t, func(t *testing.T, dialect db.Dialect, dbURL string) {
		t.Parallel()
		e := startMailUIServer(t, dbURL)
		c := "/c/" + e.cid
		shots := screenshotDir(dialect)
		long := strings.Repeat("W", 600)
		if _, err := e.em.Deliver("support@agentmail.to", emulator.DeliverRequest{From: "Sam <sam@example.com>",
			Subject: long, Text: "Hello\n" + strings.Repeat("x", 400)}); err != nil {
			t.Fatal(err)
		}
		// The task's title is the subject cut to the title limit; the task is
		// the only one.
		var task string
		testkit.Eventually(t, 30*time.Second, "the long subject's task", func() bool {
			if ts := e.api.List("/api/companies/" + e.cid + "/issues"); len(ts) == 1 {
				task = testkit.ID(ts[0])
			}
			return task != ""
		})

		// A run that fails without output (after the email's own run).
		testkit.Eventually(t, 60*time.Second, "the email's run to finish", func() bool {
			runs := e.api.List("/api/companies/" + e.cid + "/heartbeat-runs?issueId=" + task)
			return len(runs) == 1 && runs[0]["finishedAt"] != nil
		})
		e.api.JSON("PATCH", "/api/agents/"+e.aid, map[string]any{"adapterConfig": map[string]any{
			"command": "/bin/sh", "args": []string{"-c", "exit 3"}}}, 200)
		e.api.JSON("POST", "/api/agents/"+e.aid+"/wakeup", map[string]any{"reason": "manual", "issueId": task}, 202)
		var run map[string]any
		testkit.Eventually(t, 60*time.Second, "the failing run to finish", func() bool {
			runs := e.api.List("/api/companies/" + e.cid + "/heartbeat-runs?issueId=" + task)
			for _, r := range runs {
				if r["wakeReason"] == "manual" && r["finishedAt"] != nil {
					run = r
					return true
				}
			}
			return false
		})
		if run["status"] != "failed" || run["error"] == nil || run["error"] == "" {
			t.Fatalf("the failing run: %v", run)
		}
		b := newBrowser(t, e.inst.URL(), 1280, 900)
		rid := run["id"].(string)
		b.visit(c + "/runs/" + rid)
		if got := b.text("#run-error"); !strings.Contains(got, run["error"].(string)) {
			t.Errorf("the run's log view does not show its error %q: %q", run["error"], got)
		}

		// A provider 503 on the reply: retrying, not uncertain.
		e.em.AddFault(emulator.Fault{Match: emulator.FaultMatch{Operation: "reply_message"}, Status: 503, Code: "service_unavailable"})
		e.wakeAutoreply(t, task)
		var pid string
		testkit.Eventually(t, 60*time.Second, "a failed attempt of the reply", func() bool {
			th := e.api.JSON("GET", "/api/companies/"+e.cid+"/email/tasks/"+task, nil, 200)
			pubs, _ := th["publications"].([]any)
			if len(pubs) == 1 {
				p := pubs[0].(map[string]any)
				if p["retrying"] == true && p["attempts"].(float64) >= 1 {
					pid = p["id"].(string)
				}
			}
			return pid != ""
		})
		b.visit(c + "/tasks/" + task)
		intent := `#task-timeline article[aria-label="Email send intent"]`
		if txt := b.text(intent); !strings.Contains(txt, "Retrying · attempt ") || strings.Contains(txt, "Delivery uncertain") ||
			b.exists(intent+" details.resolve") || !strings.Contains(b.text(intent+" .retry-line"), "next ") {
			t.Errorf("a retrying send does not say so, or offers resolution: %q", txt)
		}
		// The agent finished its work: the task is Done, its reply still waits.
		testkit.Eventually(t, 60*time.Second, "the task done", func() bool {
			return e.api.JSON("GET", "/api/issues/"+task, nil, 200)["status"] == "done"
		})
		b.visit(c + "/tasks/" + task)
		if !strings.Contains(b.text("#task-header"), "Reply pending") || !strings.Contains(b.text("#task-email"), "Reply pending") {
			t.Errorf("a Done task with a queued reply does not say so: %q", b.text("#task-header"))
		}
		b.visit(c + "/tasks")
		if !strings.Contains(b.text(`#task-list tr[data-task-id="`+task+`"]`), "Reply pending") {
			t.Errorf("the task list does not show the pending reply")
		}
		b.visit(c)

		// Retries stop: now the operator is asked to resolve, legibly.
		testkit.ExpireSend(t, e.inst, pid)
		b.visit(c + "/tasks/" + task)
		b.waitText(intent, "Delivery uncertain", 10*time.Second)
		b.openDetails(intent + " details.resolve")
		b.checkSchemes()
		b.visit(c + "/apps/agentmail/inboxes/" + e.eid + "/disconnect")
		b.visit(c + "/runs")
		if !strings.Contains(b.text("#run-list"), run["error"].(string)) {
			t.Errorf("the Runs page does not show the failed run's error")
		}
		b.screenshot(shots, "runs-desktop")
		b.visit(c + "/email")
		// The address pages live under Email: its sidebar item and crumbs.
		b.visit(c + "/apps/agentmail/inboxes/" + e.eid + "/settings")
		if got, crumbs := b.text(`.sidenav a[aria-current="page"]`), b.text(".crumbs"); got != "Email" || !strings.HasPrefix(crumbs, "Email") {
			t.Errorf("an address page sits under %q with crumbs %q, not under Email", got, crumbs)
		}
		b.visit(c + "/members")
		b.visit(c + "/company")
		b.screenshot(shots, "company-desktop")

		// A phone: the same pages, no widening, no cut-off table.
		p := newBrowser(t, e.inst.URL(), 390, 844)
		for _, path := range []string{c + "/tasks/" + task, c + "/runs/" + rid, c + "/tasks", c, c + "/agents", c + "/activity", c + "/members",
			c + "/apps/agentmail", c + "/apps/agentmail/inboxes/" + e.eid + "/conversations", c + "/runs", c + "/company", c + "/email"} {
			p.visit(path)
		}
	})
}
