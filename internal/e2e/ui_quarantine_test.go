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

// The Quarantine tab, in a browser: two automatic messages are held back;
// blocking the first one's sender adds it to the inbox's sender rules
// (synced to AgentMail), releasing the second makes its task appear; the
// held message is shown as plain text, never rendered.
func TestUIQuarantineBlockAndRelease(t *testing.T) {
	t.Parallel()
	dbtest.EachURL(t, func(t *testing.T, dialect db.Dialect, dbURL string) {
		t.Parallel()
		e := startMailUIServer(t, dbURL)
		c := "/c/" + e.cid
		for _, m := range []emulator.DeliverRequest{
			{From: "Robot <robot@noise.example>", Subject: "Your weekly digest", Text: "<img src=x onerror=alert(1)> digest",
				Headers: map[string]string{"Auto-Submitted": "auto-generated"}},
			{From: "Partner Desk <desk@partner.example>", Subject: "Order 4411 confirmed", Text: "Please book the truck.",
				Headers: map[string]string{"Auto-Submitted": "auto-generated"}},
		} {
			if _, err := e.em.Deliver("support@agentmail.to", m); err != nil {
				t.Fatal(err)
			}
		}
		inbox := c + "/apps/agentmail/inboxes/" + e.eid
		testkit.Eventually(t, 30*time.Second, "two quarantined messages", func() bool {
			page := e.api.JSON("GET", "/api/email/inboxes/"+e.eid+"/quarantine", nil, 200)
			return len(page["items"].([]any)) == 2
		})

		b := newBrowser(t, e.inst.URL(), 1280, 900)
		b.visit(inbox + "/quarantine")
		b.waitText("#quarantine", "Your weekly digest", 10*time.Second)
		b.waitText("#quarantine", "Order 4411 confirmed", 5*time.Second)
		if !strings.Contains(b.text("#quarantine"), "Automatic mail") {
			t.Errorf("reason not shown: %q", b.text("#quarantine"))
		}
		// Screenshots for docs/email-setup.md ("Who may write to your agent").
		shots := screenshotDir(dialect)
		b.screenshot(shots, "email-quarantine-desktop")

		// The message page shows text only.
		b.click(`tr[data-from*="robot@noise.example"] a`)
		b.waitText("#quarantined-text", "<img src=x onerror=alert(1)> digest", 10*time.Second)
		if n := eval[int](b, `document.querySelectorAll("main img").length`); n != 0 {
			t.Errorf("%d images rendered from a quarantined message", n)
		}

		// Block the robot's sender.
		b.visit(inbox + "/quarantine")
		b.click(`tr[data-from*="robot@noise.example"] input[type=checkbox]`)
		b.submit("#block-selected")
		b.waitText("main", "Blocked the sender of 1 message(s).", 10*time.Second)
		b.visit(inbox + "/senders")
		if got := b.value("#receive-block"); got != "robot@noise.example" {
			t.Errorf("receive block list after block-sender: %q", got)
		}
		testkit.Eventually(t, 30*time.Second, "the block synced to AgentMail", func() bool {
			for _, le := range e.em.ListEntries("support@agentmail.to") {
				if le.Direction == "receive" && le.ListType == "block" && le.Entry == "robot@noise.example" {
					return true
				}
			}
			return false
		})
		b.visit(inbox + "/senders")
		b.waitText("#sync-state", "Synced to AgentMail", 10*time.Second)
		b.screenshot(shots, "email-senders-desktop")

		// Release the partner's message: its task appears.
		b.visit(inbox + "/quarantine")
		b.click(`tr[data-from*="desk@partner.example"] input[type=checkbox]`)
		b.submit("#release-selected")
		b.waitText("main", "Released 1 message(s)", 10*time.Second)
		task := e.task(t, "Order 4411 confirmed")
		b.visit(c + "/tasks/" + task)
		b.waitText("main", "Please book the truck.", 15*time.Second)
		b.visit(inbox + "/quarantine")
		if strings.Contains(b.text("#quarantine"), "Order 4411 confirmed") {
			t.Error("a released message is still in the quarantine")
		}

		// The company-wide view lists the rest, with its inbox.
		b.visit(c + "/apps/agentmail/quarantine")
		b.waitText("#quarantine", "Your weekly digest", 10*time.Second)
		b.waitText("#quarantine", "support@agentmail.to", 5*time.Second)
	})
}
