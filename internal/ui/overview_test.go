package ui_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// The overview's "Needs attention" links each inbox that needs someone:
// an unfinished setup to "Finish setup" in the wizard, a paused inbox to
// its settings.
func TestOverviewAttentionLinksInboxes(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, dbURL string) {
		e := startEmail(t, dbURL)
		e.enable()
		create := func(username string, want int) string {
			id := testkit.NewUUID()
			e.api.JSON("POST", "/api/companies/"+e.company+"/email/inboxes", map[string]any{"assignedAgentId": e.agent, "apiKey": sentinel,
				"username": username, "domain": "agentmail.to", "receiveMode": "websocket", "idempotencyKey": id}, want)
			return id
		}
		paused := create("held", 201)
		e.api.JSON("POST", "/api/email/inboxes/"+paused+"/control", map[string]string{"action": "pause"}, 200)
		// AgentMail fails once after the inbox exists: a draft with an address.
		e.fault("create_inbox_key", 403, "missing_permission")
		draft := create("unfinished", 422)
		if st, addr := e.inboxStatus(draft); st != "draft" || addr == nil {
			t.Fatalf("draft: %s %v", st, addr)
		}

		for _, path := range []string{e.c(), e.c() + "?fragment=overview"} {
			p := e.get(path)
			if path == e.c() {
				checkPage(t, path, p)
			}
			for _, want := range []string{
				`<span>unfinished@agentmail.to · Mail Assistant</span> <a href="` + e.am() + `/setup/` + draft + `">Finish setup</a>`,
				`<a href="` + e.am() + `/inboxes/` + paused + `/settings">held@agentmail.to · Mail Assistant</a>`,
			} {
				if !strings.Contains(p.body, want) {
					t.Errorf("%s lacks %s", path, want)
				}
			}
		}
		// Both links lead to pages that exist.
		if p := e.get(e.am() + "/inboxes/" + paused + "/settings"); p.status != 200 || !strings.Contains(p.body, "Paused") {
			t.Errorf("paused inbox settings: %d", p.status)
		}
		// The wizard may settle its URL state first (a redirect or two).
		p, loc := e.get(e.am()+"/setup/"+draft), e.am()+"/setup/"+draft
		for i := 0; i < 3 && p.status == 303; i++ {
			loc = p.header.Get("Location")
			p = e.get(loc)
		}
		if !strings.Contains(loc, "/setup/"+draft) || p.status != 200 || !strings.Contains(p.body, "This setup belongs to Mail Assistant.") {
			t.Fatalf("finish setup: %s %d %s", loc, p.status, p.body)
		}
		// That draft was made with a raw key, so it has no saved connection:
		// step 1 picks one, then the review finishes the existing address.
		conn := e.connect(sentinel)
		loc = location(t, e.post(loc, e.am()+"/setup/"+draft+"/agent", url.Values{"agent": {e.agent}, "connection": {conn}}))
		p = e.get(loc)
		for i := 0; i < 3 && p.status == 303; i++ {
			loc = p.header.Get("Location")
			p = e.get(loc)
		}
		if p.status != 200 || !strings.Contains(p.body, "Finish connecting") || !strings.Contains(p.body, "unfinished@agentmail.to") {
			t.Fatalf("review of the draft: %s %d %s", loc, p.status, p.body)
		}
		if loc := location(t, e.create(loc, draft)); loc != e.am()+"/setup/"+draft+"/done" {
			t.Fatalf("finish: %s", loc)
		}
	})
}
