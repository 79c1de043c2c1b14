package ui_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/paperclipai/paperclipai/internal/agentmail"
	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/emulator"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

func (e *emailEnv) fault(op string, status int, code string) {
	e.em.AddFault(emulator.Fault{Match: emulator.FaultMatch{Operation: op}, Status: status, Code: code, Times: 1})
}

func (e *emailEnv) inboxStatus(id string) (string, any) {
	got := e.api.JSON("GET", "/api/email/inboxes/"+id, nil, 200)
	return got["status"].(string), got["address"]
}

func query(loc string) string { return strings.SplitN(loc, "?", 2)[1] }

// The wizard's server rules (no browser): the resume table, step
// validation, the create error mapping, restarts and key changes.
func TestWizardServerLogic(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, dbURL string) {
		e := startEmail(t, dbURL)
		e.enable()
		conn := e.connect(sentinel)

		// Fresh id: the agent can still be chosen.
		fresh := e.am() + "/setup/" + testkit.NewUUID() + "?step=agent&connection=" + conn
		p := e.get(fresh)
		checkPage(t, fresh, p)
		if strings.Contains(p.body, `id="email-agent" name="agent" data-refresh="agent-notes" disabled`) || !strings.Contains(p.body, `value="`+conn+`" selected`) {
			t.Fatalf("fresh wizard: %s", p.body)
		}

		// Step 1 validation.
		rid := testkit.NewUUID()
		step1 := e.am() + "/setup/" + rid + "?step=agent"
		p = e.post(step1, e.am()+"/setup/"+rid+"/agent?step=agent", url.Values{"agent": {""}, "connection": {conn}})
		if p.status != 400 || !strings.Contains(p.body, "Select an available company agent") {
			t.Fatalf("no agent: %d", p.status)
		}
		p = e.post(step1, e.am()+"/setup/"+rid+"/agent?step=agent", url.Values{"agent": {e.agent}, "connection": {""}, "newKey": {""}})
		if p.status != 400 || !strings.Contains(p.body, "Enter an API key to continue.") {
			t.Fatalf("no key: %d", p.status)
		}
		p = e.post(step1, e.am()+"/setup/"+rid+"/agent?step=agent", url.Values{"agent": {e.agent}, "connection": {""}, "newKey": {"am_not_a_real_key"}})
		if p.status != 422 || !strings.Contains(p.body, "Operation: inspect_key · AgentMail status: 403") || strings.Contains(p.body, "am_not_a_real_key") {
			t.Fatalf("bad key on step 1: %d", p.status)
		}

		// Step 2 validation: the rule, a known-taken address, webhooks.
		provider := e.provider(sentinel)
		if _, err := provider.CreateInbox(context.Background(), agentmail.CreateInboxRequest{Username: "taken"}); err != nil {
			t.Fatal(err)
		}
		loc := location(t, e.post(step1, e.am()+"/setup/"+rid+"/agent?step=agent&connection="+conn, url.Values{"agent": {e.agent}, "connection": {conn}}))
		addrAction := e.am() + "/setup/" + rid + "/address?" + query(loc)
		p = e.get(loc)
		if !strings.Contains(p.body, `value="mail-assistant"`) || !strings.Contains(p.body, "AgentMail confirms availability when you create the address.") ||
			strings.Contains(p.body, "is available") {
			t.Fatalf("address step: %s", p.body)
		}
		for _, c := range []struct {
			form   url.Values
			status int
			want   string
		}{
			{url.Values{"mode": {"new"}, "username": {"-bad name"}, "domain": {"agentmail.to"}}, 422, "Use letters, digits, dots, hyphens or underscores"},
			{url.Values{"mode": {"new"}, "username": {"taken"}, "domain": {"agentmail.to"}}, 409, "This email address is already in use. Choose a different address."},
			{url.Values{"mode": {"new"}, "username": {"ok"}, "domain": {"agentmail.to"}, "receive": {"webhook"}}, 400, "Webhook receiving requires a public HTTPS URL"},
			{url.Values{"mode": {"new"}, "username": {"ok"}, "domain": {"unverified.example"}}, 422, "Choose one of the offered domains."},
			{url.Values{"mode": {"existing"}, "inbox": {"nope@agentmail.to"}}, 422, "Choose an available inbox."},
		} {
			p := e.post(loc, addrAction, c.form)
			if p.status != c.status || !strings.Contains(p.body, c.want) {
				t.Errorf("address %v: %d, want %d %q", c.form, p.status, c.status, c.want)
			}
		}
		if p := e.post(loc, addrAction, url.Values{"mode": {"new"}, "username": {"taken"}, "domain": {"agentmail.to"}}); !strings.Contains(p.body, "taken-agent@agentmail.to") ||
			!regexp.MustCompile(`id="step-address-continue"[^>]*disabled`).MatchString(p.body) || !strings.Contains(p.body, `aria-invalid="true"`) {
			t.Errorf("taken: no suggestions or the button is enabled: %s", p.body)
		}
		// The live check (script): taken and unknown, never free.
		check := e.am() + "/setup/" + rid + "/check?" + query(loc)
		for user, want := range map[string]string{"taken": `data-status="taken"`, "fresh-name": `data-status="unknown"`, "Bad!": `data-status="invalid"`} {
			p := e.post(loc, check, url.Values{"username": {user}, "domain": {"agentmail.to"}})
			if p.status != 200 || !strings.Contains(p.body, want) || strings.Contains(p.body, "<html") || strings.Contains(p.body, "is available") {
				t.Errorf("check %s: %d %s", user, p.status, p.body)
			}
		}

		// Provider 5xx at create_inbox: an address-less draft, same id on Try again.
		_, review := e.wizardToReview(conn, "first")
		rid = ridOf(t, review)
		e.fault("create_inbox", 503, "service_unavailable")
		p = e.create(review, rid)
		if p.status != 502 || !strings.Contains(p.body, "AgentMail is temporarily unavailable. Try again in a moment.") ||
			!strings.Contains(p.body, "Operation: create_inbox · AgentMail status: 503 · Code: service_unavailable") ||
			!strings.Contains(p.body, `id="try-again"`) || strings.Contains(p.body, "Something went wrong") || strings.Contains(p.body, "Your agent’s email is ready") {
			t.Fatalf("create 503: %d %s", p.status, p.body)
		}
		if st, addr := e.inboxStatus(rid); st != "draft" || addr != nil {
			t.Fatalf("after a 503: %s %v", st, addr)
		}
		// Resume: the draft's agent is locked.
		p = e.get(e.am() + "/setup/" + rid + "?step=agent")
		if !strings.Contains(p.body, "This setup belongs to Mail Assistant.") || !strings.Contains(p.body, " disabled aria-describedby=\"email-agent-locked\"") {
			t.Errorf("draft without address: %s", p.body)
		}
		if loc := location(t, e.create(review, rid)); !strings.HasSuffix(loc, "/setup/"+rid+"/done") {
			t.Fatalf("try again: %s", loc)
		}
		n := 0
		for _, r := range e.em.Requests("/v0/inboxes") {
			if r.Method == "POST" && r.Path == "/v0/inboxes" && strings.Contains(string(r.Body), `"paperclip-`+rid+`"`) {
				n++
			}
		}
		if n != 2 {
			t.Errorf("create_inbox requests with the setup's client id: %d, want 2 (the refused one and the retry)", n)
		}

		// Permission failure after the address exists: finish-setup mode.
		_, review = e.wizardToReview(conn, "second")
		rid = ridOf(t, review)
		e.fault("create_inbox_key", 403, "missing_permission")
		p = e.create(review, rid)
		if p.status != 422 || !strings.Contains(p.body, "AgentMail did not allow Paperclip to create an inbox-scoped API key.") {
			t.Fatalf("create_inbox_key 403: %d %s", p.status, p.body)
		}
		p = e.get(e.am() + "/setup/" + rid + "?step=address")
		if p.status != 200 || !strings.Contains(p.body, "Finish connecting") || strings.Contains(p.body, `id="email-name"`) ||
			!strings.Contains(p.body, "Choose a different address") || !strings.Contains(p.body, "second@agentmail.to") {
			t.Fatalf("draft with address: %d %s", p.status, p.body)
		}
		// Restart keeps a draft with an address (its inbox exists).
		loc = location(t, e.post(e.am()+"/setup/"+rid, e.am()+"/setup/"+rid+"/restart?step=review", url.Values{"reason": {"address"}}))
		if ridOf(t, loc) == rid || !strings.Contains(loc, "step=address") {
			t.Fatalf("restart: %s", loc)
		}
		if st, _ := e.inboxStatus(rid); st != "draft" {
			t.Fatalf("a draft with an address after restart: %s", st)
		}
		if loc := location(t, e.post(e.am()+"/setup/"+rid, e.am()+"/setup/"+rid+"/create?step=review", nil)); !strings.HasSuffix(loc, "/done") {
			t.Fatalf("finish connecting: %s", loc)
		}

		// Restart discards an address-less draft.
		_, review = e.wizardToReview(conn, "third")
		rid = ridOf(t, review)
		e.fault("create_inbox", 503, "service_unavailable")
		e.create(review, rid)
		location(t, e.post(review, e.am()+"/setup/"+rid+"/restart?"+query(review), url.Values{"reason": {"address"}}))
		if st, _ := e.inboxStatus(rid); st != "archived" {
			t.Fatalf("an address-less draft after restart: %s", st)
		}
		// … and that setup is over.
		if p := e.get(e.am() + "/setup/" + rid); p.status != http.StatusConflict || !strings.Contains(p.body, "Start a new setup") {
			t.Fatalf("archived setup: %d", p.status)
		}

		// Taken at the provider (another organization): back to step 2 with
		// the address in taken, the same request id.
		other := e.provider(e.orgKey("Other"))
		if _, err := other.CreateInbox(context.Background(), agentmail.CreateInboxRequest{Username: "dup"}); err != nil {
			t.Fatal(err)
		}
		_, review = e.wizardToReview(conn, "dup")
		rid = ridOf(t, review)
		loc = location(t, e.create(review, rid))
		if ridOf(t, loc) != rid || !strings.Contains(loc, "step=address") || !strings.Contains(loc, "taken=dup%40agentmail.to") {
			t.Fatalf("provider taken: %s", loc)
		}
		if p := e.get(loc); !strings.Contains(p.body, "This email address is already in use.") {
			t.Fatalf("taken after create: %s", p.body)
		}
		loc = location(t, e.post(loc, e.am()+"/setup/"+rid+"/address?"+query(loc), url.Values{"mode": {"new"}, "username": {"dup-team"}, "domain": {"agentmail.to"}}))
		if loc := location(t, e.create(loc, rid)); !strings.HasSuffix(loc, "/setup/"+rid+"/done") {
			t.Fatalf("second try: %s", loc)
		}

		// Paused: the wizard sends to the inbox settings.
		e.api.JSON("POST", "/api/email/inboxes/"+rid+"/control", map[string]string{"action": "pause"}, 200)
		if loc := location(t, e.get(e.am()+"/setup/"+rid)); !strings.HasSuffix(loc, "/inboxes/"+rid+"/settings") {
			t.Fatalf("paused: %s", loc)
		}

		// A second new key on step 1 with a connection in the URL: a new
		// request id and a new credential (never the old one).
		_, second := e.em.CreateOrganization("Second")
		rid = testkit.NewUUID()
		before := len(e.api.List("/api/companies/" + e.company + "/email/connections"))
		loc = location(t, e.post(step1, e.am()+"/setup/"+rid+"/agent?step=agent&connection="+conn,
			url.Values{"agent": {e.agent}, "connection": {""}, "newKey": {second}}))
		newConn := regexp.MustCompile(`connection=([0-9a-f-]{36})`).FindStringSubmatch(loc)
		if ridOf(t, loc) == rid || newConn == nil || newConn[1] == conn {
			t.Fatalf("account change: %s", loc)
		}
		if after := len(e.api.List("/api/companies/" + e.company + "/email/connections")); after != before+1 {
			t.Fatalf("connections %d → %d", before, after)
		}

		// An inbox-scoped key: the restricted notice, then the sealed handle.
		in, err := provider.CreateInbox(context.Background(), agentmail.CreateInboxRequest{Username: "locked"})
		if err != nil {
			t.Fatal(err)
		}
		k, err := provider.CreateInboxAPIKey(context.Background(), in.InboxID, agentmail.CreateAPIKeyRequest{Name: "locked"})
		if err != nil {
			t.Fatal(err)
		}
		rid = testkit.NewUUID()
		action := e.am() + "/setup/" + rid + "/agent?step=agent"
		before = len(e.api.List("/api/companies/" + e.company + "/email/connections"))
		p = e.post(step1, action, url.Values{"agent": {e.agent}, "connection": {""}, "newKey": {k.APIKey}})
		handle := regexp.MustCompile(`name="keyHandle" value="([^"]+)"`).FindStringSubmatch(p.body)
		if p.status != 200 || !strings.Contains(p.body, "That key only connects locked@agentmail.to.") || handle == nil ||
			strings.Contains(p.body, k.APIKey) || !strings.Contains(p.body, `id="use-existing-inbox"`) {
			t.Fatalf("inbox key: %d %s", p.status, p.body)
		}
		if got := len(e.api.List("/api/companies/" + e.company + "/email/connections")); got != before {
			t.Fatal("an inbox key was saved before the user chose to use it")
		}
		if p := e.post(step1, action, url.Values{"agent": {e.agent}, "connection": {""}, "keyHandle": {handle[1] + "x"}, "allowInboxKey": {"1"}}); p.status != 400 ||
			!strings.Contains(p.body, "Paste the API key again.") {
			t.Fatalf("tampered handle: %d", p.status)
		}
		loc = location(t, e.post(step1, action, url.Values{"agent": {e.agent}, "connection": {""}, "keyHandle": {handle[1]}, "allowInboxKey": {"1"}}))
		if !strings.Contains(loc, "mode=existing") || !strings.Contains(loc, "inbox=locked%40agentmail.to") {
			t.Fatalf("use the existing inbox: %s", loc)
		}
		if p := e.get(loc); strings.Contains(p.body, `id="email-name"`) || !strings.Contains(p.body, "Choose a key for a new address") {
			t.Errorf("inbox-key address step: %s", p.body)
		}

		// Low trust without a boundary is refused at step 1.
		lt := testkit.ID(e.api.JSON("POST", "/api/companies/"+e.company+"/agents", map[string]any{"name": "Careful", "adapterType": "process",
			"adapterConfig": map[string]any{"command": "/bin/true"}, "permissions": map[string]any{"trustPreset": "low_trust_review"}}, 201))
		p = e.post(step1, e.am()+"/setup/"+testkit.NewUUID()+"/agent?step=agent", url.Values{"agent": {lt}, "connection": {conn}})
		if p.status != 422 || !strings.Contains(p.body, "This agent needs a work boundary before it can receive email.") ||
			!strings.Contains(p.body, "Configure work boundary") {
			t.Fatalf("low trust without a boundary: %d", p.status)
		}

		if strings.Contains(e.seen.String(), sentinel) || strings.Contains(e.seen.String(), second) || strings.Contains(e.seen.String(), k.APIKey) {
			t.Error("an API key appears in a UI answer")
		}
		for _, key := range []string{sentinel, second, k.APIKey} {
			if strings.Contains(e.inst.Logs.String(), key) {
				t.Error("an API key appears in the server log")
			}
		}
	})
}

// Email text is shown as text: a conversation's subject and an inbox's
// activity never render markup.
func TestEmailPagesEscape(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, dbURL string) {
		e := startEmail(t, dbURL)
		e.enable()
		conn := e.connect(sentinel)
		_, review := e.wizardToReview(conn, "esc")
		rid := ridOf(t, review)
		location(t, e.create(review, rid))
		testkit.Eventually(t, 20e9, "a live socket", func() bool { return e.em.SubscribedCount("esc@agentmail.to") == 1 })
		evil := `<script>alert(1)</script> "><img src=x onerror=alert(2)> ![t](http://127.0.0.1:1/p.png)`
		if _, err := e.em.Deliver("esc@agentmail.to", emulator.DeliverRequest{From: `"<img src=x onerror=alert(3)>" <jane@example.com>`,
			Subject: evil, Text: evil}); err != nil {
			t.Fatal(err)
		}
		path := e.am() + "/inboxes/" + rid + "/conversations"
		testkit.Eventually(t, 20e9, "the conversation", func() bool { return strings.Contains(e.get(path).body, "data-conversation-id") })
		for _, p := range []string{path, e.am() + "/inboxes/" + rid + "/activity", e.am()} {
			body := e.get(p).body
			if strings.Contains(body, "<script>alert") || strings.Contains(body, "<img src=x") {
				t.Errorf("%s renders markup from email", p)
			}
		}
		if body := e.get(path).body; !strings.Contains(body, "&lt;script&gt;alert(1)&lt;/script&gt;") || !strings.Contains(body, "![t](http://127.0.0.1:1/p.png)") {
			t.Errorf("the subject is not shown as text: %s", body)
		}
	})
}
