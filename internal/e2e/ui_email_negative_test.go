package e2e_test

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp/kb"

	"github.com/paperclipai/paperclipai/internal/agentmail"
	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/emulator"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// mailCo is one journey's company: an agent, an AgentMail organization of
// its own and (optionally) a saved credential for it.
type mailCo struct {
	id, agent, key, conn string
}

func (m mailCo) am() string { return "/c/" + m.id + "/apps/agentmail" }

// wizardURL is a wizard step of a fresh request id with the given state.
func (m mailCo) wizardURL(rid, step string, extra ...string) string {
	q := url.Values{"step": {step}, "agent": {m.agent}}
	if m.conn != "" {
		q.Set("connection", m.conn)
	}
	for i := 0; i+1 < len(extra); i += 2 {
		q.Set(extra[i], extra[i+1])
	}
	return m.am() + "/setup/" + rid + "?" + q.Encode()
}

func (e *emailUI) seed(name string, withConn bool) mailCo {
	e.t.Helper()
	api := e.api
	var m mailCo
	m.id = testkit.ID(api.JSON("POST", "/api/companies", map[string]string{"name": name}, 201))
	m.agent = testkit.ID(api.JSON("POST", "/api/companies/"+m.id+"/agents", map[string]any{"name": name + " Agent",
		"adapterType": "process", "adapterConfig": map[string]any{"command": "/bin/true"}}, 201))
	_, m.key = e.em.CreateOrganization(name + " Mail")
	if withConn {
		m.conn = testkit.ID(api.JSON("POST", "/api/companies/"+m.id+"/email/connections", map[string]any{"apiKey": m.key,
			"grantKind": "organization", "agentIds": []string{m.agent}, "idempotencyKey": testkit.NewUUID()}, 201))
	}
	return m
}

// fault installs a provider failure for the running journey only: it is
// removed when the journey ends, whether or not a request used it up.
// Why: the emulator applies a fault to whichever request matches first,
// from any company; a journey that fails before its own request left its
// fault for the next journey's setup, which then failed for a reason not
// its own (seen as a 403 missing_permission on create_inbox_key in a later
// journey after N5 had stopped early).
func (e *emailUI) fault(t *testing.T, f emulator.Fault) {
	t.Helper()
	id := e.em.AddFault(f)
	t.Cleanup(func() { _ = e.em.RemoveFault(id) })
}

// createInboxRequests are the provider's inbox creations whose body
// mentions username.
func (e *emailUI) createInboxRequests(username string) []emulator.RecordedRequest {
	var out []emulator.RecordedRequest
	for _, r := range e.em.Requests("/v0/inboxes") {
		if r.Method == "POST" && r.Path == "/v0/inboxes" && strings.Contains(string(r.Body), `"`+username+`"`) {
			out = append(out, r)
		}
	}
	return out
}

// TestUIEmailNegativeJourneys are the email journeys that go wrong or take
// a side road (N1–N7) and the keyboard-only wizard (K1), in one server
// and one browser; each journey has its own company and AgentMail
// organization.
func TestUIEmailNegativeJourneys(t *testing.T) {
	t.Parallel()
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, dbURL string) {
		t.Parallel()
		e := startEmailUI(t, dbURL, -1)
		e.api.JSON("PATCH", "/api/instance/settings", map[string]any{"experimental": map[string]any{"enableChatConnectors": true}}, 200)
		b := newBrowser(t, e.inst.URL(), 1280, 900)
		run := func(name string, fn func(t *testing.T)) {
			t.Run(name, func(t *testing.T) {
				parent := b.t
				b.t = t
				defer func() { b.t = parent }()
				fn(t)
			})
		}

		run("N1 bad API key", func(t *testing.T) {
			m := e.seed("N1", false)
			b.visit(m.am() + "/connect/key?grant=organization&agents=specific&agent=" + m.agent)
			b.submit("#connect-submit")
			b.waitText(".alert-error", "Enter an API key to continue.", 5*time.Second)
			b.fill("#api-key", "am_not_a_real_key")
			b.submit("#connect-submit")
			const refused = "AgentMail rejected the API key. Check that the key is correct and still active, then try again."
			b.waitText(".alert-error", refused, 5*time.Second)
			b.openDetails(".diag")
			b.waitText(".diag", "Operation: inspect_key · AgentMail status: 403 · Code: unknown", 5*time.Second)
			if v := b.value("#api-key"); v != "" {
				t.Fatalf("the key field was re-rendered: %q", v)
			}
			if got := e.api.List("/api/companies/" + m.id + "/email/connections"); len(got) != 0 {
				t.Fatalf("connections: %v", got)
			}
			b.visit(m.am() + "/setup?agent=" + m.agent)
			b.fill("#email-credential", "")
			b.fill("#email-new-key", "am_not_a_real_key")
			b.submit("#step-agent-continue")
			b.waitText(".alert-error", refused, 5*time.Second)
			b.waitText("h2", "Who should handle this inbox?", 5*time.Second)
			if v := b.value("#email-new-key"); v != "" {
				t.Fatalf("the key field was re-rendered: %q", v)
			}
		})

		run("N2 provider 5xx then resume", func(t *testing.T) {
			m := e.seed("N2", true)
			rid := testkit.NewUUID()
			e.fault(t, emulator.Fault{Match: emulator.FaultMatch{Operation: "create_inbox"}, Status: 503, Code: "service_unavailable", Times: 1})
			b.visit(m.wizardURL(rid, "review", "username", "n2"))
			b.submit("#create-address")
			b.waitText(".alert-error", "AgentMail is temporarily unavailable. Try again in a moment.", 5*time.Second)
			b.openDetails(".diag")
			b.waitText(".diag", "Operation: create_inbox · AgentMail status: 503 · Code: service_unavailable", 5*time.Second)
			if h := b.text("h1"); h == readyH1 || !strings.Contains(b.path(), "/setup/"+rid) {
				t.Fatalf("after the failure: %q at %s", h, b.path())
			}
			if got := e.api.JSON("GET", "/api/email/inboxes/"+rid, nil, 200); got["status"] != "draft" || got["address"] != nil {
				t.Fatalf("draft: %v", got)
			}
			b.submit("#try-again")
			b.waitText("h1", readyH1, 10*time.Second)
			reqs := e.createInboxRequests("n2")
			for _, r := range reqs {
				if !strings.Contains(string(r.Body), `"client_id":"paperclip-`+rid+`"`) {
					t.Errorf("an inbox creation without the setup's client id: %s", r.Body)
				}
			}
			if len(reqs) != 2 {
				t.Errorf("inbox creations: %d, want 2 (refused, retried)", len(reqs))
			}
			list, err := e.provider(m.key).ListInboxes(context.Background(), agentmail.ListParams{Limit: 100})
			if err != nil || len(list.Inboxes) != 1 {
				t.Fatalf("provider inboxes: %v %v", list, err)
			}
			if got := e.api.List("/api/companies/" + m.id + "/email/inboxes"); len(got) != 1 || got[0]["id"] != rid {
				t.Fatalf("endpoints: %v", got)
			}
		})

		run("N3 taken address pre-check", func(t *testing.T) {
			m := e.seed("N3", true)
			if _, err := e.provider(m.key).CreateInbox(context.Background(), agentmail.CreateInboxRequest{Username: "n3taken"}); err != nil {
				t.Fatal(err)
			}
			b.visit(m.wizardURL(testkit.NewUUID(), "address"))
			b.fill("#email-name", "n3taken")
			b.waitText("#email-address-error", "This email address is already in use. Choose a different address.", 10*time.Second)
			if b.attr("#email-name", "aria-invalid") != "true" || !b.disabled("#step-address-continue") {
				t.Fatal("a taken address is not marked invalid, or the button is enabled")
			}
			if got := e.api.List("/api/companies/" + m.id + "/email/inboxes"); len(got) != 0 {
				t.Fatalf("a check started a setup: %v", got)
			}
			b.waitText(".suggestions", "n3taken-agent@agentmail.to", 5*time.Second)
			b.click(`.address-suggestion[data-suggest="n3taken-agent"]`)
			if v := b.value("#email-name"); v != "n3taken-agent" {
				t.Fatalf("suggestion: %q", v)
			}
			b.waitText("#email-address-status", "AgentMail confirms availability when you create the address.", 10*time.Second)
			if b.text("#email-address-error") != "" || b.disabled("#step-address-continue") {
				t.Fatal("the error stayed after choosing a suggestion")
			}
			b.submit("#step-address-continue")
			b.waitText("#review-address", "n3taken-agent@agentmail.to", 5*time.Second)
			b.submit("#create-address")
			b.waitText("h1", readyH1, 10*time.Second)
		})

		run("N4 taken at the provider, same request id", func(t *testing.T) {
			m := e.seed("N4", true)
			other := e.seed("N4 other", false)
			if _, err := e.provider(other.key).CreateInbox(context.Background(), agentmail.CreateInboxRequest{Username: "n4dup"}); err != nil {
				t.Fatal(err)
			}
			rid := testkit.NewUUID()
			b.visit(m.wizardURL(rid, "review", "username", "n4dup"))
			b.submit("#create-address")
			b.waitText("#email-address-error", "This email address is already in use. Choose a different address.", 5*time.Second)
			if p := b.path(); !strings.Contains(p, "/setup/"+rid+"?") || !strings.Contains(p, "taken=n4dup%40agentmail.to") || !strings.Contains(p, "step=address") {
				t.Fatalf("after the refusal: %s", p)
			}
			if !b.disabled("#step-address-continue") {
				t.Fatal("the button is enabled for a refused address")
			}
			b.visit(b.path())
			b.waitText("#email-address-error", "This email address is already in use.", 5*time.Second)
			b.fill("#email-name", "n4dup-team")
			b.waitText("#email-address-status", "AgentMail confirms availability when you create the address.", 10*time.Second)
			if b.disabled("#step-address-continue") {
				t.Fatal("the button stayed disabled after a change")
			}
			b.submit("#step-address-continue")
			b.submit("#create-address")
			b.waitText("h1", readyH1, 10*time.Second)
			if !strings.Contains(b.path(), "/setup/"+rid+"/done") {
				t.Fatalf("a new request id: %s", b.path())
			}
			if got := e.api.JSON("GET", "/api/email/inboxes/"+rid, nil, 200); got["address"] != "n4dup-team@agentmail.to" {
				t.Fatalf("inbox: %v", got)
			}
		})

		run("N5 permission failure then finish setup", func(t *testing.T) {
			m := e.seed("N5", true)
			rid := testkit.NewUUID()
			// Only this journey's inbox key creation is refused.
			e.fault(t, emulator.Fault{Match: emulator.FaultMatch{Operation: "create_inbox_key", PathPrefix: "/v0/inboxes/n5@agentmail.to/"},
				Status: 403, Code: "missing_permission", Times: 1})
			b.visit(m.wizardURL(rid, "review", "username", "n5"))
			b.submit("#create-address")
			b.waitText(".alert-error", "AgentMail did not allow Paperclip to create an inbox-scoped API key. Check your API key permissions and AgentMail account limits, then try again.", 5*time.Second)
			if strings.Contains(b.text("body"), "Internal server error") {
				t.Fatal("internal server error shown")
			}
			b.visit(m.am())
			b.waitText("#inboxes", "Setup incomplete", 5*time.Second)
			b.submit(`#inboxes a[href$="/setup/` + rid + `"]`)
			b.waitText("#review-address", "n5@agentmail.to", 5*time.Second)
			if b.exists("#email-name") || !b.exists("#choose-different") {
				t.Fatal("finish-setup mode: an address field, or no way to choose another address")
			}
			b.waitText("#create-address", "Finish connecting", 5*time.Second)
			b.submit("#create-address")
			b.waitText("h1", readyH1, 10*time.Second)
			if n := len(e.createInboxRequests("n5")); n != 1 {
				t.Fatalf("inbox creations: %d", n)
			}
		})

		run("N6 inbox-scoped key", func(t *testing.T) {
			m := e.seed("N6", true)
			p := e.provider(m.key)
			in, err := p.CreateInbox(context.Background(), agentmail.CreateInboxRequest{Username: "n6locked"})
			if err != nil {
				t.Fatal(err)
			}
			k, err := p.CreateInboxAPIKey(context.Background(), in.InboxID, agentmail.CreateAPIKeyRequest{Name: "locked"})
			if err != nil {
				t.Fatal(err)
			}
			before := len(e.api.List("/api/companies/" + m.id + "/email/connections"))
			b.visit(m.am() + "/setup?agent=" + m.agent)
			b.fill("#email-credential", "")
			b.fill("#email-new-key", k.APIKey)
			b.submit("#step-agent-continue")
			b.waitText("#restricted-inbox", "That key only connects n6locked@agentmail.to. Choose a saved account key or enter one to create a new address.", 5*time.Second)
			if b.exists("#email-name") || strings.Contains(b.html(), k.APIKey) {
				t.Fatal("restricted inbox: an address field, or the key in the page")
			}
			if got := len(e.api.List("/api/companies/" + m.id + "/email/connections")); got != before {
				t.Fatal("the key was saved before it was chosen")
			}
			b.submit("#use-existing-inbox")
			b.waitText("h2", "email address", 5*time.Second)
			if !b.checked("#address-mode-existing") || !b.disabled("#address-mode-new") || b.value("#email-existing") != "n6locked@agentmail.to" {
				t.Fatal("the address step is not locked to the key's inbox")
			}
			b.submit("#step-address-continue")
			b.waitText("#create-address", "Connect email address", 5*time.Second)
			b.submit("#create-address")
			b.waitText("h1", readyH1, 10*time.Second)
		})

		run("N7 low-trust gates", func(t *testing.T) {
			m := e.seed("N7", true)
			lt := testkit.ID(e.api.JSON("POST", "/api/companies/"+m.id+"/agents", map[string]any{"name": "Careful", "adapterType": "process",
				"adapterConfig": map[string]any{"command": "/bin/true"}, "permissions": map[string]any{"trustPreset": "low_trust_review"}}, 201))
			proj := testkit.ID(e.api.JSON("POST", "/api/companies/"+m.id+"/projects", map[string]string{"name": "Inbox work"}, 201))
			m.agent = lt
			b.visit(m.am() + "/setup?agent=" + lt + "&connection=" + m.conn)
			b.waitText("#agent-notes", "This agent needs a work boundary before it can receive email.", 5*time.Second)
			if !b.disabled("#step-agent-continue") {
				t.Fatal("Continue is enabled for a low-trust agent without a boundary")
			}
			wizard := b.path()
			b.submit(`#trust-notice a`)
			b.waitText("h1", "Trust settings · Careful", 5*time.Second)
			b.click("#boundary-project")
			b.fill("#boundary-project-id", proj)
			b.submit("main form button[type=submit]")
			if p := b.path(); p != wizard {
				t.Fatalf("back from the trust page at %s, want %s", p, wizard)
			}
			b.waitText("#trust-notice", "Low-trust review configured", 5*time.Second)
			b.waitText("#trust-notice .check-no", "Isolated workspaces are on", 5*time.Second)
			b.submit("#step-agent-continue")
			b.submit("#step-address-continue")
			b.submit("#create-address")
			b.waitText(".alert-error", "Low-trust email agents require isolated workspaces and a sandbox environment. Complete runtime setup before connecting this inbox.", 5*time.Second)
			review := strings.Replace(b.path(), "/create?", "?", 1)

			b.visit("/settings")
			if !b.checked("#enable-isolated") {
				b.click("#enable-isolated")
			}
			b.submit("form[action='/settings'] button[type=submit]")
			b.visit("/c/" + m.id + "/projects")
			b.fill("#env-name", "Sandbox")
			b.click("#env-sandbox")
			b.submit("form[action$='/environments'] button[type=submit]")
			b.waitText(".flash", "Environment created.", 5*time.Second)
			var env string
			for _, en := range e.api.List("/api/companies/" + m.id + "/environments") {
				if en["name"] == "Sandbox" {
					env = en["id"].(string)
				}
			}
			b.visit("/c/" + m.id + "/agents/" + lt + "/edit")
			b.fill("#agent-environment", env)
			b.submit("main form button[type=submit]")
			b.waitText(".flash", "Agent saved.", 5*time.Second)
			b.visit(review)
			b.submit("#create-address")
			b.waitText("h1", readyH1, 10*time.Second)

			b.visit("/c/" + m.id + "/agents/" + lt + "/trust")
			b.click("#trust-standard")
			b.submit("main form button[type=submit]")
			perms := e.api.JSON("GET", "/api/agents/"+lt, nil, 200)["permissions"].(map[string]any)
			if pol, ok := perms["authorizationPolicy"].(map[string]any); perms["trustPreset"] != "standard" || (ok && len(pol) != 0) {
				t.Fatalf("after reverting: %v", perms)
			}
		})

		run("K1 keyboard only", func(t *testing.T) {
			m := e.seed("K1", true)
			b.visit(m.am() + "/connections/" + m.conn)
			eval[bool](b, `document.activeElement && document.activeElement.blur(), true`)
			tabTo := func(id string) {
				t.Helper()
				prevTop := -1e9
				for i := 0; i < 80; i++ {
					b.key(kb.Tab)
					f := b.focused()
					vis := eval[[]float64](b, `(() => { const a = document.activeElement; const s = getComputedStyle(a);
						const main = document.querySelector("main").contains(a) ? 1 : 0;
						return [s.outlineStyle === "none" ? 0 : parseFloat(s.outlineWidth), a.getBoundingClientRect().top + scrollY, main]; })()`)
					if vis[0] < 2 {
						t.Errorf("%s has no visible focus outline", f)
					}
					if vis[2] == 1 {
						if vis[1] < prevTop-4 {
							t.Errorf("focus went up the page to %s", f)
						}
						prevTop = vis[1]
					}
					if f == id {
						return
					}
				}
				t.Fatalf("%s is not reachable with Tab (focus at %s)", id, b.focused())
			}
			enter := func(next string) {
				t.Helper()
				// Every step of the wizard has the same path prefix: wait for
				// the new document, not only for the path, or the old page
				// (still "complete") is checked while it goes away.
				b.clickAndWaitForDocument("the next document", func() { b.key(kb.Enter) })
				b.waitPath(next, 10*time.Second)
				b.checkPage()
			}
			tabTo("#give-address")
			enter(m.am() + "/setup/")
			tabTo("#email-agent")
			b.key(kb.ArrowDown)
			b.waitText("#agent-notes", "K1 Agent is not a low-trust agent", 5*time.Second)
			b.eventually("Continue enabled", 5*time.Second, func() bool { return !b.disabled("#step-agent-continue") })
			tabTo("#step-agent-continue")
			enter(m.am() + "/setup/")
			b.waitText("h2", "email address", 5*time.Second)
			tabTo("#email-name")
			b.waitText("#email-address-status", "AgentMail confirms availability", 5*time.Second)
			enter(m.am() + "/setup/")
			b.waitText("#review-address", "k1-agent@agentmail.to", 5*time.Second)
			tabTo("#create-address")
			enter(m.am() + "/setup/")
			b.waitText("h1", readyH1, 10*time.Second)
		})
	})
}
