package conformance_test

import (
	"context"
	"slices"
	"testing"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/emulator"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// Spam, blocked and unauthenticated mail, classified by the provider, never
// starts work, end to end: the emulator labels it and emits the filtered
// event variants (to which Paperclip does not subscribe), the catch-up scan
// lists it and it is quarantined with its label as the reason (nothing is
// dropped without a trace), and inside an existing conversation it is not
// retained when the thread is next read.
func TestProviderFilteredMail(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := newEnv(t, url)
		e.connect("filtered", nil)
		ctx := context.Background()
		if err := e.Em.SetBlockList(e.addr, []string{"blocked.example"}); err != nil {
			t.Fatal(err)
		}
		legit := e.deliver(emulator.DeliverRequest{Subject: "Legit", Text: "a real question"})
		task := e.task("Legit")

		kinds := []struct {
			label string
			req   emulator.DeliverRequest
		}{
			{"spam", emulator.DeliverRequest{Headers: map[string]string{"X-Spam-Flag": "YES"}}},
			{"blocked", emulator.DeliverRequest{From: "Mallory <m@blocked.example>"}},
			{"unauthenticated", emulator.DeliverRequest{Headers: map[string]string{"X-Emulator-Auth": "fail"}}},
		}
		var filtered []string
		for _, k := range kinds {
			for _, inThread := range []bool{false, true} {
				req := k.req
				req.Subject, req.Text = "Filtered "+k.label, "buy now"
				if inThread {
					req.Subject, req.InReplyTo = "Re: Legit", legit.MessageID
				}
				res := e.deliver(req)
				if inThread && res.ThreadID != legit.ThreadID {
					t.Fatalf("%s reply not threaded by the provider", k.label)
				}
				m, err := e.provider(e.OrgKey).GetMessage(ctx, e.addr, res.MessageID)
				if err != nil || !slices.Contains(m.Labels, k.label) || !slices.Contains(m.Labels, "received") {
					t.Fatalf("%s message labels: %v %v", k.label, m, err)
				}
				filtered = append(filtered, res.MessageID)
			}
		}
		// A legitimate reply makes Paperclip read the thread again.
		e.deliver(emulator.DeliverRequest{Subject: "Re: Legit", Text: "following up", InReplyTo: legit.MessageID})
		testkit.Eventually(t, wait, "the follow-up's wake", func() bool { return len(e.wakes(task)) == 2 })
		// A catch-up scan after an interruption lists them (AgentMail hides
		// them unless asked): each is admitted, finished as filtered and
		// quarantined with its label as the reason.
		e.Control(t, e.ep, "pause")
		e.Control(t, e.ep, "resume")
		e.waitReceiving()
		testkit.Eventually(t, wait, "every filtered message admitted by the scan", func() bool {
			for _, id := range filtered {
				if _, ok := e.deliveryOf(id); !ok {
					return false
				}
			}
			return true
		})
		e.settled()
		for i, id := range filtered {
			d, ok := e.deliveryOf(id)
			if !ok || d.State != domain.DeliveryFiltered {
				t.Fatalf("label-filtered delivery of %s: %+v", id, d)
			}
			var reason string
			if err := e.Store.DB.QueryRowContext(ctx, `SELECT reason FROM email_quarantine WHERE provider_message_id = $1`, id).Scan(&reason); err != nil {
				t.Fatalf("quarantine of %s: %v", id, err)
			}
			testkit.MustEqual(t, "quarantine reason", reason, kinds[i/2].label)
		}
		for _, k := range kinds {
			testkit.MustEqual(t, "tasks for "+k.label+" mail", len(e.tasksTitled("Filtered "+k.label)), 0)
		}
		th := e.Board.JSON("GET", "/api/companies/"+e.CompanyID+"/email/tasks/"+task, nil, 200)
		for _, m := range th["messages"].([]any) {
			if slices.Contains(filtered, m.(map[string]any)["providerMessageId"].(string)) {
				t.Fatalf("filtered mail retained on the task: %v", m)
			}
		}
		testkit.MustEqual(t, "retained messages", len(th["messages"].([]any)), 2)
		testkit.MustEqual(t, "wakes", len(e.wakes(task)), 2)
	})
}
