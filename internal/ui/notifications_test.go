package ui_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/notifications"
	"github.com/paperclipai/paperclipai/internal/store"
)

// TestNotificationWebhooksPage: the notification webhooks settings page
// creates a webhook and shows its signing secret once (never on any later
// page), shows everything escaped, lists each webhook's delivery log
// (event, state, attempts, response, next retry, time) one page at a time
// with "Load more", and deletes a webhook.
func TestNotificationWebhooksPage(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, dbURL string) {
		e := startLocal(t, dbURL)
		f := e.seed("Notified")
		path := "/c/" + f.company + "/notifications"
		p := e.get(path)
		checkPage(t, path, p)
		for _, want := range []string{"No notification webhooks yet.", `value="email.review_requested"`, `value="inbox.bounce_rate_high"`,
			`value="agent.budget_exceeded"`, `name="format"`} {
			if !strings.Contains(p.body, want) {
				t.Errorf("notifications page lacks %q", want)
			}
		}
		if m := e.get("/c/" + f.company + "/members"); !strings.Contains(m.body, `href="`+path+`"`) {
			t.Error("the members page does not link the notifications page")
		}

		// Created: the secret is on the answer page only. The local board is
		// the instance administrator, so a loopback URL is allowed.
		hook := "http://127.0.0.1:9/<b>hook</b>?x=\"y\""
		res := e.post(path, path, url.Values{"url": {hook}, "event": {"email.send_failed", "inbox.health_changed"}, "format": {"standard"}})
		if res.status != http.StatusCreated {
			t.Fatalf("create: %d %s", res.status, res.body)
		}
		secret := regexp.MustCompile(`whsec_[A-Za-z0-9+/=]+`).FindString(res.body)
		if secret == "" || !strings.Contains(res.body, "won’t be shown again") {
			t.Fatalf("the creation page does not show the secret once: %s", res.body)
		}
		if strings.Contains(res.body, "<b>hook</b>") {
			t.Fatal("the webhook URL is not escaped")
		}
		list := e.api.JSON("GET", "/api/companies/"+f.company+"/notification-webhooks", nil, 200)["items"].([]any)
		if len(list) != 1 {
			t.Fatalf("webhooks: %v", list)
		}
		wid := list[0].(map[string]any)["id"].(string)

		// 60 deliveries in the log: 30 delivered (204), 29 failed (500) and
		// the newest pending with its next retry.
		ctx := context.Background()
		st := e.inst.Store
		base := time.Now().UTC().Add(-time.Hour)
		for i := range 60 {
			d := store.NotificationDelivery{ID: notifications.NewDeliveryID(), CompanyID: f.company, WebhookID: wid,
				Event: "email.send_failed", Payload: "{}", State: store.NotificationFailed, CreatedAt: base.Add(time.Duration(i) * time.Second)}
			if err := st.InsertNotificationDelivery(ctx, st.DB, d); err != nil {
				t.Fatal(err)
			}
			switch {
			case i < 30:
				err := st.RecordNotificationDelivered(ctx, st.DB, d.ID, 204, d.CreatedAt.Add(time.Second))
				if err != nil {
					t.Fatal(err)
				}
			case i < 59:
				if err := st.RecordNotificationAttempt(ctx, st.DB, d.ID, store.NotificationFailed, 500, "the webhook answered 500",
					d.CreatedAt); err != nil {
					t.Fatal(err)
				}
			default:
				// Pending far in the future: the delivery loop leaves it.
				if err := st.RecordNotificationAttempt(ctx, st.DB, d.ID, store.NotificationPending, 503, "the webhook answered 503",
					time.Now().Add(20*time.Hour)); err != nil {
					t.Fatal(err)
				}
			}
		}
		logPath := path + "/" + wid
		first := e.get(logPath)
		checkPage(t, logPath, first)
		if n := strings.Count(first.body, `class="delivery-item"`); n != 50 {
			t.Fatalf("first page: %d deliveries, want 50", n)
		}
		for _, want := range []string{"Pending", "503", "the webhook answered 503", "Failed", "the webhook answered 500", `rel="next"`, "&lt;b&gt;hook&lt;/b&gt;"} {
			if !strings.Contains(first.body, want) {
				t.Errorf("delivery log lacks %q", want)
			}
		}
		next := regexp.MustCompile(`href="([^"]+)" rel="next"`).FindStringSubmatch(first.body)
		if next == nil {
			t.Fatal("no Load more link")
		}
		second := e.get(strings.ReplaceAll(next[1], "&amp;", "&"))
		checkPage(t, next[1], second)
		if n := strings.Count(second.body, `class="delivery-item"`); n != 10 || !strings.Contains(second.body, "Delivered") ||
			!strings.Contains(second.body, "204") || strings.Contains(second.body, `rel="next"`) {
			t.Fatalf("second page: %d deliveries: %s", n, second.body)
		}
		for _, pg := range []string{e.get(path).body, first.body, second.body} {
			if strings.Contains(pg, secret) || strings.Contains(pg, "whsec_") {
				t.Fatal("a later page shows the signing secret")
			}
		}
		if e.get(path+"/"+fmt.Sprint("00000000-0000-4000-8000-000000000000")).status != http.StatusNotFound {
			t.Error("an unknown webhook's log is not 404")
		}

		// Delete.
		del := e.post(path, logPath+"/delete", nil)
		if del.status != http.StatusSeeOther && del.status != http.StatusFound {
			t.Fatalf("delete: %d %s", del.status, del.body)
		}
		if list := e.api.JSON("GET", "/api/companies/"+f.company+"/notification-webhooks", nil, 200)["items"].([]any); len(list) != 0 {
			t.Fatalf("webhooks after delete: %v", list)
		}
	})
}
