package conformance_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/emulator"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// saveConnection saves key as a company credential and returns its id.
func (e *env) saveConnection(key string) string {
	e.t.Helper()
	c := e.Board.JSON("POST", "/api/companies/"+e.CompanyID+"/email/connections", map[string]any{"apiKey": key,
		"allAgents": true, "idempotencyKey": testkit.NewUUID()}, 201)
	return testkit.ID(c)
}

// The address check (check-address): a visible inbox is "taken" in any
// letter case, on any page of the provider's listing; anything else is
// "unknown" (never "free"); provider failures keep their status class and
// a safe diagnostic but never the provider's text; a provider 429 is a 429
// with Retry-After.
func TestCheckAddress(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := newEnv(t, url)
		conn := e.saveConnection(e.OrgKey)
		path := "/api/companies/" + e.CompanyID + "/email/connections/" + conn + "/check-address"
		check := func(username, domain string) map[string]any {
			t.Helper()
			body := map[string]any{"username": username}
			if domain != "" {
				body["domain"] = domain
			}
			return e.Board.JSON("POST", path, body, 200)
		}
		for _, u := range []string{"sales", "support", "billing"} {
			e.createInbox(u)
		}
		// A small provider page: the taken address may be on any page.
		e.Em.SetMaxPageSize(2)
		for _, c := range []struct{ username, domain, address, status string }{
			{"sales", "", "sales@agentmail.to", "taken"},
			{"Support", "AgentMail.to", "support@agentmail.to", "taken"},
			{"BILLING", "", "billing@agentmail.to", "taken"},
			{"nobody-yet", "", "nobody-yet@agentmail.to", "unknown"},
			{"sales", "example.com", "sales@example.com", "unknown"},
		} {
			got := check(c.username, c.domain)
			if got["address"] != c.address || got["status"] != c.status {
				t.Errorf("check %s@%s = %v, want %s %s", c.username, c.domain, got, c.address, c.status)
			}
		}
		st, raw := e.Board.Do("POST", path, map[string]any{"username": "bad name"})
		testkit.MustEqual(t, "invalid username", st, http.StatusBadRequest)

		// A provider failure: 502 with the operation and provider status,
		// never the provider's own words.
		e.Em.AddFault(emulator.Fault{Match: emulator.FaultMatch{Operation: "list_inboxes"}, Status: 500, Times: 1,
			Body: []byte(`{"name":"InternalError","message":"secret-provider-detail"}`)})
		st, raw = e.Board.Do("POST", path, map[string]any{"username": "sales"})
		testkit.MustEqual(t, "provider 500", st, http.StatusBadGateway)
		body := errorOf(t, raw)
		details, _ := body["details"].(map[string]any)
		if details["operation"] != "list_inboxes" || details["providerStatus"] != float64(500) || strings.Contains(string(raw), "secret-provider-detail") {
			t.Fatalf("provider 500 answer: %s", raw)
		}
		// A provider 401 (the saved key was revoked): a clear message.
		e.Em.AddFault(emulator.Fault{Match: emulator.FaultMatch{Operation: "list_inboxes"}, Status: 401, Code: "unauthorized", Times: 1})
		st, raw = e.Board.Do("POST", path, map[string]any{"username": "sales"})
		if st != http.StatusUnprocessableEntity || !strings.Contains(string(raw), "rejected the API key") {
			t.Fatalf("provider 401 answer: %d %s", st, raw)
		}
		// Rate limited: 429 with the provider's delay.
		e.Em.AddFault(emulator.Fault{Match: emulator.FaultMatch{Operation: "list_inboxes"}, Status: 429, Code: "rate_limit_exceeded",
			Headers: map[string]string{"Retry-After": "7"}, Times: 1})
		resp := e.rawPost(path, `{"username":"sales"}`)
		if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "7" {
			t.Fatalf("provider 429 answer: %d Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
		}
		// The fault was used up: the check works again.
		testkit.MustEqual(t, "after the faults", check("sales", "")["status"], any("taken"))
	})
}
