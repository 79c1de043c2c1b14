package conformance_test

import (
	"net/http"
	"sort"
	"strings"
	"testing"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// inspected is the inspect answer reduced to comparable strings.
func inspected(t *testing.T, m map[string]any) (scope, inboxes, domains string) {
	t.Helper()
	var ins, doms []string
	for _, in := range m["inboxes"].([]any) {
		ins = append(ins, in.(map[string]any)["inboxId"].(string))
	}
	for _, d := range m["domains"].([]any) {
		dm := d.(map[string]any)
		doms = append(doms, dm["domain"].(string)+"="+dm["status"].(string))
	}
	sort.Strings(ins)
	sort.Strings(doms)
	return m["scope"].(string), strings.Join(ins, ","), strings.Join(doms, ",")
}

// Inspect reports what a key reaches: an organization key every inbox and
// domain (with status, on every page), a pod key only its pod's, an inbox
// key only its inbox and no domains; through the direct route and for a
// saved credential. Setup on a verified custom domain creates the inbox
// there; an unverified one is refused.
func TestInspectScopesAndCustomDomain(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := newEnv(t, url)
		org := e.OrgKey
		e.createInbox("front")
		pod := e.provCall(org, "POST", "/pods", map[string]any{"name": "team"})["pod_id"].(string)
		e.provCall(org, "POST", "/pods/"+pod+"/inboxes", map[string]any{"username": "pod-desk"})
		podKey := e.provCall(org, "POST", "/pods/"+pod+"/api-keys", map[string]any{"name": "pod"})["api_key"].(string)
		e.provCall(org, "POST", "/domains", map[string]any{"domain": "mail.example.test"})
		e.provCall(org, "POST", "/domains", map[string]any{"domain": "pending.example.test"})
		e.provCall(org, "POST", "/pods/"+pod+"/domains", map[string]any{"domain": "team.example.test"})
		if err := e.Em.VerifyDomain("mail.example.test"); err != nil {
			t.Fatal(err)
		}
		inboxKey := e.inboxKey("front@agentmail.to")
		e.Em.SetMaxPageSize(1) // every list spans several pages

		inspect := func(key string) map[string]any {
			return e.Board.JSON("POST", "/api/companies/"+e.CompanyID+"/email/inspect", map[string]any{"apiKey": key}, 200)
		}
		scope, inboxes, domains := inspected(t, inspect(org))
		testkit.MustEqual(t, "org scope", scope, "organization")
		testkit.MustEqual(t, "org inboxes", inboxes, "front@agentmail.to,pod-desk@agentmail.to")
		if !strings.Contains(domains, "mail.example.test=VERIFIED") || !strings.Contains(domains, "pending.example.test=NOT_STARTED") {
			t.Fatalf("org domains: %s", domains)
		}
		scope, inboxes, domains = inspected(t, inspect(podKey))
		testkit.MustEqual(t, "pod scope", scope, "pod")
		testkit.MustEqual(t, "pod inboxes", inboxes, "pod-desk@agentmail.to")
		testkit.MustEqual(t, "pod domains", domains, "team.example.test=NOT_STARTED")
		scope, inboxes, domains = inspected(t, inspect(inboxKey))
		testkit.MustEqual(t, "inbox scope", scope, "inbox")
		testkit.MustEqual(t, "inbox inboxes", inboxes, "front@agentmail.to")
		testkit.MustEqual(t, "inbox domains", domains, "")
		// The same through a saved credential (the pod key).
		conn := e.saveConnection(podKey)
		scope, inboxes, _ = inspected(t, e.Board.JSON("POST", "/api/companies/"+e.CompanyID+"/email/connections/"+conn+"/inspect", nil, 200))
		if scope != "pod" || inboxes != "pod-desk@agentmail.to" {
			t.Fatalf("saved credential inspect: %s %s", scope, inboxes)
		}
		e.Em.SetMaxPageSize(0)

		sum := e.Setup("sales", map[string]any{"domain": "Mail.Example.Test"})
		if sum["address"] != "sales@mail.example.test" || sum["status"] != "active" {
			t.Fatalf("custom-domain setup: %v", sum)
		}
		st, raw := e.Board.Do("POST", "/api/companies/"+e.CompanyID+"/email/inboxes", map[string]any{"assignedAgentId": e.AgentID,
			"apiKey": org, "username": "sales", "domain": "pending.example.test", "idempotencyKey": "6d2f9a56-3c0e-4b8e-9d4c-1f1a2b3c4d5e"})
		if st != http.StatusBadRequest || !strings.Contains(string(raw), "Verify this custom domain") {
			t.Fatalf("unverified domain: %d %s", st, raw)
		}
	})
}
