package notifications_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/config"
	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/email"
	"github.com/paperclipai/paperclipai/internal/store"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// events returns the received events of type kind, with their data.
func (rc *receiver) events(kind string) []map[string]any {
	var out []map[string]any
	for _, r := range rc.all() {
		var ev struct {
			Type string         `json:"type"`
			Data map[string]any `json:"data"`
		}
		if json.Unmarshal(r.body, &ev) == nil && ev.Type == kind {
			out = append(out, ev.Data)
		}
	}
	return out
}

// countDeliveries counts the recorded deliveries of an event in a company.
func countDeliveries(t *testing.T, st *store.Store, companyID, event string) int {
	t.Helper()
	var n int
	if err := st.DB.QueryRowContext(context.Background(), `SELECT COUNT(*) FROM notification_deliveries WHERE company_id = $1 AND event = $2`,
		companyID, event).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestStateChangeEventsNotifyOnce: the three state-change events reach a
// subscribed webhook, each once.
//   - inbox.health_changed: an inbox's first health is a silent baseline;
//     pausing it sends one event naming the new and the previous health.
//   - agent.budget_exceeded: a wake refused for a spent budget sends one
//     event, in the wake's transaction; further refused wakes that month
//     send none.
//   - inbox.bounce_rate_high: more than 5 % of an inbox's last sends
//     bounced sends one event; on PostgreSQL two replicas each notice the
//     crossing (their bounce gauges both show it) and still one is sent.
func TestStateChangeEventsNotifyOnce(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, dialect db.Dialect, url string) {
		fast := func(c *config.Config) { c.NotificationWatchInterval = 100 * time.Millisecond }
		e := testkit.NewEmailEnv(t, url, fast)
		ctx := context.Background()
		rc := &receiver{}
		srv := httptest.NewServer(rc)
		t.Cleanup(srv.Close)
		e.Board.JSON("POST", "/api/companies/"+e.CompanyID+"/notification-webhooks", map[string]any{"url": srv.URL,
			"events": []string{"inbox.health_changed", "agent.budget_exceeded", "inbox.bounce_rate_high"}}, 201)

		// Health: the baseline first, then one event for the pause.
		ep := e.Setup("health", map[string]any{"receiveMode": "websocket"})
		epID := testkit.ID(ep)
		testkit.Eventually(t, 60*time.Second, "the inbox's health baseline", func() bool {
			v, err := e.Store.NotificationMarkValue(ctx, e.Store.DB, "inbox.health_changed:"+epID)
			return err == nil && v == "ok/connected"
		})
		if n := countDeliveries(t, e.Store, e.CompanyID, "inbox.health_changed"); n != 0 {
			t.Fatalf("the baseline sent %d events", n)
		}
		e.Board.JSON("POST", "/api/email/inboxes/"+epID+"/control", map[string]any{"action": "pause"}, 200)
		testkit.Eventually(t, 60*time.Second, "the health event", func() bool { return len(rc.events("inbox.health_changed")) == 1 })
		got := rc.events("inbox.health_changed")[0]
		if got["endpointId"] != epID || got["health"] != "paused" || got["previous"] != "ok/connected" || got["address"] != ep["address"] {
			t.Fatalf("health event: %v", got)
		}

		// Budget: one event per agent and month, in the wake's transaction.
		e.Board.JSON("PATCH", "/api/agents/"+e.AgentID, map[string]any{"budgetMonthlyCents": 500}, 200)
		if _, err := e.Store.DB.ExecContext(ctx, `UPDATE agents SET spent_monthly_cents = 500, spend_period = $1 WHERE id = $2`,
			e.Store.Now().Format("2006-01"), e.AgentID); err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			run := e.Board.JSON("POST", "/api/agents/"+e.AgentID+"/wakeup", map[string]any{"reason": fmt.Sprint("over budget ", i)}, 202)
			if run["refusalReason"] != "budget_exceeded" {
				t.Fatalf("wake %d: %v", i, run)
			}
			// Recorded with the refused run: visible as soon as the wake answers.
			if n := countDeliveries(t, e.Store, e.CompanyID, "agent.budget_exceeded"); n != 1 {
				t.Fatalf("after wake %d: %d budget events recorded, want 1", i, n)
			}
		}
		testkit.Eventually(t, 60*time.Second, "the budget event", func() bool { return len(rc.events("agent.budget_exceeded")) == 1 })
		if b := rc.events("agent.budget_exceeded")[0]; b["agentId"] != e.AgentID || b["budgetMonthlyCents"] != float64(500) ||
			b["spentMonthlyCents"] != float64(500) {
			t.Fatalf("budget event: %v", b)
		}

		// Bounce rate: 3 of the inbox's last 20 sends bounced.
		replicas := []*testkit.Instance{e.Instance}
		if dialect == db.Postgres {
			key, err := os.ReadFile(filepath.Join(e.Home, "instance", "secrets", "master.key"))
			if err != nil {
				t.Fatal(err)
			}
			cfg := testkit.EmailConfig(testkit.Config(t, url), e.Em)
			fast(&cfg)
			cfg.MasterKeyB64 = strings.TrimSpace(string(key))
			replicas = append(replicas, testkit.Start(t, cfg))
		}
		bouncer := testkit.ID(e.Setup("bouncer", nil))
		seedBounces(t, e, bouncer, 20, 3)
		testkit.Eventually(t, 60*time.Second, "every replica saw the bounce rate", func() bool {
			for _, r := range replicas {
				_, body := testkit.NewClient(t, r.URL()).Do("GET", "/metrics", nil)
				if !strings.Contains(string(body), "paperclip_email_bounce_rate_high_inboxes 1") {
					return false
				}
			}
			return true
		})
		testkit.Eventually(t, 60*time.Second, "the bounce event", func() bool { return len(rc.events("inbox.bounce_rate_high")) >= 1 })
		if n := countDeliveries(t, e.Store, e.CompanyID, "inbox.bounce_rate_high"); n != 1 {
			t.Fatalf("%d bounce events from %d replicas, want 1", n, len(replicas))
		}
		// One attempt of each delivery although every replica's loop reads
		// the due rows (the claim).
		testkit.Eventually(t, 30*time.Second, "the bounce delivery recorded", func() bool {
			var st string
			var attempts int
			err := e.Store.DB.QueryRowContext(ctx, `SELECT state, attempts FROM notification_deliveries WHERE event = 'inbox.bounce_rate_high'
				AND company_id = $1`, e.CompanyID).Scan(&st, &attempts)
			if err == nil && st == "delivered" && attempts != 1 {
				t.Fatalf("the bounce event was attempted %d times", attempts)
			}
			return err == nil && st == "delivered"
		})
		// Each delivery reached the receiver once (the bouncer's health
		// change is a fourth, legitimate event).
		seen := map[string]bool{}
		for _, r := range rc.all() {
			id := r.header.Get("webhook-id")
			if seen[id] {
				t.Fatalf("delivery %s reached the receiver twice", id)
			}
			seen[id] = true
		}
	})
}

// seedBounces records n sent emails of the inbox, bounced of them
// bounced by their receipts.
func seedBounces(t *testing.T, e *testkit.EmailEnv, endpointID string, n, bounced int) {
	t.Helper()
	ctx := context.Background()
	st := e.Store
	issue := testkit.ID(e.Board.JSON("POST", "/api/companies/"+e.CompanyID+"/issues", map[string]any{"title": "Outreach"}, 201))
	err := st.Tx(ctx, func(tx *sql.Tx) error {
		c := domain.EmailConversation{CompanyID: e.CompanyID, EndpointID: endpointID, IssueID: issue, ExternalConversationID: "bounces",
			ExternalThreadID: "bounces", Subject: "Outreach"}
		if _, err := st.InsertConversation(ctx, tx, &c); err != nil {
			return err
		}
		for i := range n {
			p := store.EmailPublication{ID: store.NewID(), CompanyID: e.CompanyID, EndpointID: endpointID, ConversationID: c.ID,
				IssueID: issue, State: domain.SendFailed, Outcome: domain.OutcomeFailed, Request: json.RawMessage(`{}`),
				Actor: json.RawMessage(`{}`), Digest: "d"}
			if i < bounced {
				p.Error = email.BounceSendError
			}
			if err := st.InsertPublication(ctx, tx, &p); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `UPDATE email_publications SET provider_message_id = $1 WHERE id = $2`, "pm-"+p.ID, p.ID); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
