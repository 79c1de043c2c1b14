package e2e_test

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// An agent's send to a stranger is held (202 awaiting_review, the one-line
// explanation, no provider call) and the agent may not review it, not even
// its own; a person approves it.
func TestAgentSendHeldAndAgentMayNotReview(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e, token, runID, task, _ := blockingAgentEnv(t, url)
		ep := e.Setup("reviewbox", nil)
		e.Board.JSON("PUT", "/api/email/inboxes/"+testkit.ID(ep)+"/send-policy", map[string]any{"review": "new_recipients"}, 200)
		agent := e.Board.As(token, runID)
		key := testkit.NewUUID()
		acc := agent.JSON("POST", "/api/companies/"+e.CompanyID+"/email/send", map[string]any{"endpointId": ep["id"], "parentIssueId": task,
			"to": []string{"stranger@example.com"}, "subject": "Intro", "text": "Hello", "idempotencyKey": key}, 202)
		if acc["outcome"] != "awaiting_review" || acc["message"] != "A person will review this email before it is sent; do not send it again." ||
			acc["issueId"] == nil || acc["conversationId"] == nil {
			t.Fatalf("the agent's held send: %v", acc)
		}
		review := "/api/companies/" + e.CompanyID + "/email/deliveries/" + key + "/review"
		if st, body := agent.Do("POST", review, map[string]any{"action": "approve"}); st != 403 {
			t.Fatalf("an agent's approval: %d %s", st, body)
		}
		if st, _ := agent.Do("GET", "/api/companies/"+e.CompanyID+"/email/publications?outcome=awaiting_review", nil); st != 403 {
			t.Fatalf("an agent's read of the review queue: %d", st)
		}
		if n := len(e.Em.Outbox("stranger@example.com", "")); n != 0 {
			t.Fatalf("a held send reached the provider: %d", n)
		}
		e.Board.JSON("POST", review, map[string]any{"action": "approve"}, 200)
		testkit.Eventually(t, 30*time.Second, "the approved send at the provider", func() bool {
			return len(e.Em.Outbox("stranger@example.com", "")) == 1
		})
	})
}

// Approval survives the server being killed between the approval and the
// provider's answer: each approved send is sent exactly once. Send A is
// approved while the provider holds back its answer, and the server is
// killed once the provider has the email (the attempt reached it, the
// server never heard); send B is approved and the server killed at once,
// before or just as its worker calls the provider.
func TestApprovalSurvivesAServerKill(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, dialect db.Dialect, url string) {
		em := startEmulatorProc(t)
		home := t.TempDir()
		env := append(em.env(), "PAPERCLIP_PUBLIC_URL=https://paperclip.invalid", "PAPERCLIP_EMAIL_LEASE_TTL=3s",
			"PAPERCLIP_AGENTMAIL_TIMEOUT=20s")
		p := start(t, home, url, env...)
		c := testkit.NewClient(t, p.url)
		c.JSON("PATCH", "/api/instance/settings", map[string]any{"experimental": map[string]any{"enableChatConnectors": true}}, 200)
		cid := testkit.ID(c.JSON("POST", "/api/companies", map[string]any{"name": "Review Crash"}, 201))
		aid := testkit.ID(c.JSON("POST", "/api/companies/"+cid+"/agents", map[string]any{"name": "Mail Agent", "adapterType": "process",
			"adapterConfig": map[string]any{"command": "/bin/true"}}, 201))
		endpoint := testkit.ID(c.JSON("POST", "/api/companies/"+cid+"/email/inboxes", map[string]any{"assignedAgentId": aid, "apiKey": em.apiKey,
			"username": "sender", "receiveMode": "webhook", "idempotencyKey": testkit.NewUUID()}, 201))
		c.JSON("PUT", "/api/email/inboxes/"+endpoint+"/send-policy", map[string]any{"review": "all"}, 200)
		parent := testkit.ID(c.JSON("POST", "/api/companies/"+cid+"/issues", map[string]any{"title": "Outreach", "assigneeAgentId": aid}, 201))
		database := openDB(t, dialect, url, home)
		keyA, keyB := testkit.NewUUID(), testkit.NewUUID()
		for _, k := range []string{keyA, keyB} {
			acc := c.JSON("POST", "/api/companies/"+cid+"/email/send", map[string]any{"endpointId": endpoint, "parentIssueId": parent,
				"to": []string{crashRecipient}, "subject": "Held " + k, "text": "Approve me", "idempotencyKey": k}, 202)
			if acc["outcome"] != "awaiting_review" {
				t.Fatalf("held send: %v", acc)
			}
		}
		atProvider := func(key string) int {
			n := 0
			for _, m := range em.outbox(t, crashRecipient) {
				if m.IdempotencyKey == key {
					n++
				}
			}
			return n
		}
		review := func(c *testkit.Client, key string) {
			c.JSON("POST", "/api/companies/"+cid+"/email/deliveries/"+key+"/review", map[string]any{"action": "approve"}, 200)
		}

		// Kill 1: the provider has A's email, the server has not heard back.
		em.ctl.JSON("POST", "/_emulator/faults", map[string]any{"match": map[string]any{"operation": "send_message"},
			"delay_ms": 120_000, "times": 1}, 200)
		review(c, keyA)
		testkit.Eventually(t, 30*time.Second, "send A at the provider", func() bool { return atProvider(keyA) == 1 })
		_ = p.stop(t, syscall.SIGKILL)
		logKill(t, 1, 0, em, database)
		expireDeadLeases(t, dialect, database)
		clearFaults(t, em)

		// Kill 2: right after B's approval commits.
		p = start(t, home, url, env...)
		c = testkit.NewClient(t, p.url)
		review(c, keyB)
		_ = p.stop(t, syscall.SIGKILL)
		t.Logf("kill 2 right after approval: send B at the provider %d time(s)", atProvider(keyB))
		expireDeadLeases(t, dialect, database)

		p = start(t, home, url, env...)
		c = testkit.NewClient(t, p.url)
		for _, k := range []string{keyA, keyB} {
			testkit.Eventually(t, 60*time.Second, "send "+k+" settled", func() bool {
				d := c.JSON("GET", "/api/companies/"+cid+"/email/deliveries/"+k, nil, 200)
				return d["outcome"] == "sent" || d["outcome"] == "delivered"
			})
			if n := atProvider(k); n != 1 {
				t.Fatalf("approved send %s reached the provider's outbox %d times, want 1", k, n)
			}
			// A third approval after all this sends nothing more.
			st, body := c.Do("POST", "/api/companies/"+cid+"/email/deliveries/"+k+"/review", map[string]any{"action": "approve"})
			if st != 409 || !strings.Contains(string(body), "no longer awaiting review") {
				t.Fatalf("approval after the kill: %d %s", st, body)
			}
		}
	})
}
