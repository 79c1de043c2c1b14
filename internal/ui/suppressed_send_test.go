package ui_test

import (
	"context"
	"html"
	"strings"
	"testing"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// TestSuppressedSendShowsReasonAndLink: a send refused because its
// recipient is suppressed says so on the task's email view, with the
// address, the reason and since when, and links to the suppressed
// recipients, where the address is listed (issue 30).
func TestSuppressedSendShowsReasonAndLink(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, dbURL string) {
		m := startMailUI(t, dbURL)
		c := "/c/" + m.cid
		st := m.inst.Store
		if err := st.SuppressFrom(context.Background(), st.DB, m.cid, m.eid, "gone@example.com", "message.bounced", "<m1@example.com>"); err != nil {
			t.Fatal(err)
		}
		parent := testkit.ID(m.board.JSON("POST", "/api/companies/"+m.cid+"/issues", map[string]any{"title": "Outreach"}, 201))
		acc := m.board.JSON("POST", "/api/companies/"+m.cid+"/email/send", map[string]any{"endpointId": m.eid, "parentIssueId": parent,
			"to": []string{"Gone@Example.com"}, "subject": "Still there?", "text": "Hello again.", "idempotencyKey": testkit.NewUUID()}, 202)
		if acc["outcome"] != "failed" || acc["errorCode"] != "recipient_suppressed" {
			t.Fatalf("send to a suppressed recipient: %v", acc)
		}
		if n := len(m.em.Outbox("gone@example.com", "")); n != 0 {
			t.Fatalf("a suppressed recipient was mailed %d times", n)
		}
		task := m.task(t, "Still there?")
		p := m.admin.get(c + "/tasks/" + task)
		checkPage(t, c+"/tasks/"+task, p)
		body := html.UnescapeString(p.body)
		for _, want := range []string{"gone@example.com (bounced permanently, suppressed since ", `href="` + c + `/apps/agentmail/quarantine#suppressions"`,
			"See the suppressed recipients"} {
			if !strings.Contains(body, want) {
				t.Errorf("the task's email view lacks %q", want)
			}
		}
		list := m.admin.get(c + "/apps/agentmail/quarantine")
		checkPage(t, c+"/apps/agentmail/quarantine", list)
		if !strings.Contains(list.body, `id="suppressions"`) || !strings.Contains(list.body, `data-address="gone@example.com"`) {
			t.Error("the linked page does not list the suppressed recipient")
		}
	})
}
