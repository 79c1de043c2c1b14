package ui_test

import (
	"strings"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/emulator"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// TestEmailListAcrossInboxes: the Email page lists the conversations of
// every inbox, newest first, with sender, subject, snippet, inbox,
// assignee and state, filtered by inbox and state; the API derives the
// state (a failed send reads "Delivery failed").
func TestEmailListAcrossInboxes(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, dbURL string) {
		e := startEmail(t, dbURL)
		e.enable()
		c := e.c()
		if p := e.get(c + "/email"); p.status != 200 || !strings.Contains(p.body, "No email yet.") {
			t.Fatalf("empty email page: %d", p.status)
		}
		_, key := e.em.CreateOrganization("Mail Org")
		inbox := func(user string) string {
			id := testkit.ID(e.api.JSON("POST", "/api/companies/"+e.company+"/email/inboxes", map[string]any{"assignedAgentId": e.agent,
				"apiKey": key, "username": user, "idempotencyKey": testkit.NewUUID()}, 201))
			testkit.Eventually(t, 30*time.Second, "the activation of "+user, func() bool {
				return e.api.JSON("GET", "/api/email/inboxes/"+id, nil, 200)["lastSyncAt"] != nil
			})
			return id
		}
		sales, support := inbox("sales"), inbox("support")
		deliver := func(to, from, subject, text string) {
			if _, err := e.em.Deliver(to, emulator.DeliverRequest{From: from, Subject: subject, Text: text}); err != nil {
				t.Fatal(err)
			}
		}
		deliver("sales@agentmail.to", "Ann <ann@example.com>", "Quote please", "Can I get a quote for 40 chairs?")
		var convs []map[string]any
		testkit.Eventually(t, 30*time.Second, "the first conversation", func() bool {
			convs = e.api.List("/api/companies/" + e.company + "/email/conversations")
			return len(convs) == 1
		})
		deliver("support@agentmail.to", "Bob <bob@example.com>", "Broken chair", "One leg came off.")
		testkit.Eventually(t, 30*time.Second, "both conversations, settled", func() bool {
			convs = e.api.List("/api/companies/" + e.company + "/email/conversations")
			return len(convs) == 2 && convs[0]["state"] == "new" && convs[1]["state"] == "new"
		})
		if convs[0]["subject"] != "Broken chair" || convs[0]["from"] != "Bob <bob@example.com>" || convs[0]["address"] != "support@agentmail.to" ||
			convs[0]["snippet"] != "One leg came off." || convs[0]["endpointId"] != support {
			t.Fatalf("newest conversation: %v", convs[0])
		}
		p := e.get(c + "/email")
		checkPage(t, c+"/email", p)
		for _, want := range []string{"Broken chair", "Bob &lt;bob@example.com&gt;", "One leg came off.", "to support@agentmail.to",
			"Quote please", "Mail Assistant", `data-state="new"`, `aria-current="page">Email</a>`} {
			if !strings.Contains(p.body, want) {
				t.Errorf("email page lacks %q", want)
			}
		}
		if strings.Index(p.body, "Broken chair") > strings.Index(p.body, "Quote please") {
			t.Error("the email page is not newest first")
		}
		if p := e.get(c + "/email?inbox=" + sales); strings.Contains(p.body, "Broken chair") || !strings.Contains(p.body, "Quote please") {
			t.Error("inbox filter")
		}
		if p := e.get(c + "/email?state=replied"); !strings.Contains(p.body, "No conversations match these filters.") {
			t.Error("state filter")
		}
		if p := e.get(c + "/email?fragment=conversation-list"); p.status != 200 || !strings.Contains(p.body, `id="conversation-list-region"`) {
			t.Errorf("fragment: %d", p.status)
		}
		// The email task reads as its conversation: no generated
		// Description above it.
		if p := e.get(c + "/tasks/" + convs[0]["issueId"].(string)); strings.Contains(p.body, `id="desc-h"`) || !strings.Contains(p.body, "One leg came off.") {
			t.Errorf("email task page: description shown, or the email missing")
		}
		// Agents read their own inbox through the inbox routes, not this list.
		e.api.JSON("GET", "/api/companies/"+e.company+"/email/conversations?endpointId=nope", nil, 400)
	})
}
