package e2e_test

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp/kb"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/emulator"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// TestUISearchFindsAnEmail searches, in the browser, for a word of a
// received email's body: "/" focuses the top bar's search box, the
// results page groups the email, and its link lands on the email's card
// in the task.
func TestUISearchFindsAnEmail(t *testing.T) {
	t.Parallel()
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, dbURL string) {
		t.Parallel()
		e := startEmailUI(t, dbURL, -1)
		api := e.api
		api.JSON("PATCH", "/api/instance/settings", map[string]any{"experimental": map[string]any{"enableChatConnectors": true}}, 200)
		cid := testkit.ID(api.JSON("POST", "/api/companies", map[string]any{"name": "Find Co"}, 201))
		aid := testkit.ID(api.JSON("POST", "/api/companies/"+cid+"/agents", map[string]any{"name": "Helper",
			"adapterType": "process", "adapterConfig": map[string]any{"command": "/bin/true"}}, 201))
		api.JSON("POST", "/api/companies/"+cid+"/email/inboxes", map[string]any{"assignedAgentId": aid, "apiKey": e.orgKey,
			"username": "finder", "idempotencyKey": testkit.NewUUID()}, 201)
		if _, err := e.em.Deliver("finder@agentmail.to", emulator.DeliverRequest{From: "Jane <jane@example.com>",
			Subject: "Order question", Text: "My parcel holds a zanzibarite sample, broken."}); err != nil {
			t.Fatal(err)
		}
		// The email is retained (and so searchable) once its task exists.
		var emailID string
		testkit.Eventually(t, 30*time.Second, "the email in the search index", func() bool {
			st, body := api.Do("GET", "/api/companies/"+cid+"/search?kind=email&q=zanzibarite", nil)
			var page struct {
				Items []struct{ ID string } `json:"items"`
			}
			if st == 200 && json.Unmarshal(body, &page) == nil && len(page.Items) == 1 {
				emailID = page.Items[0].ID
				return true
			}
			return false
		})

		b := newBrowser(t, e.inst.URL(), 1280, 900)
		b.visit("/c/" + cid + "/tasks")
		b.key("/")
		if f := b.focused(); f != "#top-search" {
			t.Fatalf("after /: focus on %s, want #top-search", f)
		}
		b.fill("#top-search", "zanzibarite")
		b.clickAndWaitForDocument("the search results", func() { b.key(kb.Enter) })
		b.waitPath("/c/"+cid+"/search?q=zanzibarite", 20*time.Second)
		b.checkPage()
		b.waitText("#search-email", "Order question", 5*time.Second)
		if !strings.Contains(eval[string](b, `document.querySelector("#search-email mark").innerText`), "zanzibarite") {
			t.Errorf("the snippet does not highlight the word: %s", b.text("#search-email"))
		}
		b.submit("#search-email a")
		if got := eval[string](b, `location.hash`); got != "#email-"+url.PathEscape(emailID) {
			t.Fatalf("landed at %s%s, want the email card #email-%s", b.path(), got, emailID)
		}
		b.waitText("#email-"+emailID, "zanzibarite", 10*time.Second)
	})
}
