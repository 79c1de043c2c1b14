package email_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/paperclipai/paperclipai/internal/config"
	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/emulator"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

type errBody struct {
	Error   string         `json:"error"`
	Code    string         `json:"code"`
	Details map[string]any `json:"details"`
}

func decodeErr(t *testing.T, raw []byte) errBody {
	t.Helper()
	var b errBody
	if err := json.Unmarshal(raw, &b); err != nil {
		t.Fatalf("decode %s: %v", raw, err)
	}
	return b
}

// privateText is provider text the fault bodies carry; it must never reach
// Paperclip's responses.
const privateText = "PRIVATE-provider-message fix=https://secret.example/docs inbox=zz@agentmail.to"

func providerFault(e *testkit.EmailEnv, op string, status int, code string, headers map[string]string) {
	body, _ := json.Marshal(map[string]any{"name": "Err", "code": code, "message": privateText})
	if code == "" {
		body, _ = json.Marshal(map[string]any{"message": privateText})
	}
	e.Em.AddFault(emulator.Fault{Match: emulator.FaultMatch{Operation: op}, Status: status, Body: body, Headers: headers, Times: 1})
}

func TestProviderErrorsMapToHTTP(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := testkit.NewEmailEnv(t, url)
		setup := func(username string) (int, errBody, http.Header) {
			t.Helper()
			req := map[string]any{"assignedAgentId": e.AgentID, "apiKey": e.OrgKey, "username": username, "idempotencyKey": testkit.NewUUID()}
			st, raw := e.Board.Do("POST", inboxesPath(e), req)
			return st, decodeErr(t, raw), nil
		}
		details := func(b errBody, status float64, op string) {
			t.Helper()
			if len(b.Details) != 3 || b.Details["providerStatus"] != status || b.Details["operation"] != op || b.Details["code"] == nil {
				t.Fatalf("details must be exactly {code, providerStatus, operation}: %v", b.Details)
			}
		}
		// create_inbox_key 404 → 422 "address was saved".
		providerFault(e, "create_inbox_key", 404, "not_found", nil)
		st, b, _ := setup("keyless")
		if st != 422 || !strings.Contains(b.Error, "address was saved") {
			t.Fatalf("create_inbox_key 404: %d %+v", st, b)
		}
		details(b, 404, "create_inbox_key")
		// resource_taken / already_exists on create_inbox (403) → 409.
		for _, code := range []string{"resource_taken", "already_exists"} {
			providerFault(e, "create_inbox", 403, code, nil)
			st, b, _ = setup("taken-" + code[:4])
			if st != 409 || b.Code != "agentmail_address_taken" || !strings.Contains(b.Error, "already in use") || b.Details["field"] != "username" {
				t.Fatalf("%s: %d %+v", code, st, b)
			}
		}
		// resource_taken on create_inbox_key → 422, not "already in use".
		providerFault(e, "create_inbox_key", 403, "resource_taken", nil)
		st, b, _ = setup("keytaken")
		if st != 422 || b.Code != "agentmail_request_failed" || strings.Contains(b.Error, "already in use") {
			t.Fatalf("resource_taken on key: %d %+v", st, b)
		}
		// Generic create_inbox status mapping.
		cases := []struct {
			status int
			want   int
			msg    string
		}{
			{401, 422, "rejected the API key"},
			{403, 422, "rejected the API key"}, // a bare 403: AgentMail's gateway refusing the key
			{400, 422, "Try a different address"},
			{409, 422, "Try a different address"},
			{422, 422, "Try a different address"},
			{404, 422, "could not find"},
			{429, 429, "rate limiting"},
			{503, 502, "temporarily unavailable"},
		}
		for i, c := range cases {
			headers := map[string]string{}
			if c.status == 429 {
				headers["Retry-After"] = "12"
			}
			providerFault(e, "create_inbox", c.status, "", headers)
			req := map[string]any{"assignedAgentId": e.AgentID, "apiKey": e.OrgKey, "username": "gen" + string(rune('a'+i)), "idempotencyKey": testkit.NewUUID()}
			hreq, _ := http.NewRequest("POST", e.URL()+inboxesPath(e), strings.NewReader(mustJSON(req)))
			hreq.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(hreq)
			if err != nil {
				t.Fatal(err)
			}
			var got errBody
			json.NewDecoder(resp.Body).Decode(&got)
			resp.Body.Close()
			if resp.StatusCode != c.want || !strings.Contains(got.Error, c.msg) {
				t.Fatalf("create_inbox %d → %d %+v, want %d %q", c.status, resp.StatusCode, got, c.want, c.msg)
			}
			details(got, float64(c.status), "create_inbox")
			if c.status == 429 && resp.Header.Get("Retry-After") != "12" {
				t.Fatalf("Retry-After: %q", resp.Header.Get("Retry-After"))
			}
		}
		// Runtime-key creation 403 → "create an inbox-scoped API key".
		providerFault(e, "create_inbox_key", 403, "missing_permission", nil)
		st, b, _ = setup("nokeyperm")
		if st != 422 || !strings.Contains(b.Error, "create an inbox-scoped API key") || strings.Contains(b.Error, "different address") {
			t.Fatalf("runtime key 403: %d %+v", st, b)
		}
		// Provider 401 on inspect → 422 (not Paperclip's 401).
		providerFault(e, "inspect_key", 401, "unauthorized", nil)
		st, raw := e.Board.Do("POST", "/api/companies/"+e.CompanyID+"/email/inspect", map[string]any{"apiKey": e.OrgKey})
		if b := decodeErr(t, raw); st != 422 || b.Details["operation"] != "inspect_key" {
			t.Fatalf("inspect 401: %d %+v", st, b)
		}
		// Paperclip's own missing-permission 403 passes unchanged.
		member := e.Board.JSON("POST", "/api/companies/"+e.CompanyID+"/members", map[string]any{"email": "m@example.com", "role": "member"}, 201)
		mkey := e.Board.JSON("POST", "/api/companies/"+e.CompanyID+"/board-keys", map[string]any{"userId": member["userId"]}, 201)
		st, raw = e.Board.As(mkey["token"].(string), "").Do("POST", "/api/companies/"+e.CompanyID+"/email/inspect", map[string]any{"apiKey": e.OrgKey})
		if b := decodeErr(t, raw); st != 403 || b.Error != "Missing permission: tools:manage_connections" || b.Details != nil {
			t.Fatalf("own 403: %d %+v", st, b)
		}
		noSecrets(t, e, privateText, "PRIVATE-provider", "secret.example", e.OrgKey)
	})
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// Failures keep a resumable draft; the same request id then
// succeeds with exactly one provider inbox creation and one endpoint.
func TestFailedSetupKeepsResumableDraft(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := testkit.NewEmailEnv(t, url)
		draftAddress := func(id string) any {
			return e.Board.JSON("GET", "/api/email/inboxes/"+id, nil, 200)["address"]
		}
		// create_inbox 403: no address saved; the same id then succeeds.
		id1 := testkit.NewUUID()
		req := map[string]any{"assignedAgentId": e.AgentID, "apiKey": e.OrgKey, "username": "first", "idempotencyKey": id1}
		providerFault(e, "create_inbox", 403, "missing_permission", nil)
		if st, raw := e.Board.Do("POST", inboxesPath(e), req); st != 422 || !strings.Contains(string(raw), "create_inbox") {
			t.Fatalf("create_inbox 403: %d %s", st, raw)
		}
		if a := draftAddress(id1); a != nil {
			t.Fatalf("no address may be saved after create_inbox fails: %v", a)
		}
		e.Board.JSON("POST", inboxesPath(e), req, 201)
		e.Board.JSON("POST", inboxesPath(e), req, 201)
		// create_inbox_key 403: the address is saved; the retry finishes.
		id2 := testkit.NewUUID()
		req2 := map[string]any{"assignedAgentId": e.AgentID, "apiKey": e.OrgKey, "username": "second", "idempotencyKey": id2}
		providerFault(e, "create_inbox_key", 403, "missing_permission", nil)
		if st, _ := e.Board.Do("POST", inboxesPath(e), req2); st != 422 {
			t.Fatalf("create_inbox_key 403: %d", st)
		}
		if a := draftAddress(id2); a != "second@agentmail.to" {
			t.Fatalf("address must be saved before key creation: %v", a)
		}
		e.Board.JSON("POST", inboxesPath(e), req2, 201)
		// Address taken: "ralph" exists already; a new username on the same id works.
		provider(t, e).CreateInbox(t.Context(), agentmailCreate("ralph"))
		id3 := testkit.NewUUID()
		req3 := map[string]any{"assignedAgentId": e.AgentID, "apiKey": e.OrgKey, "username": "ralph", "idempotencyKey": id3}
		st, raw := e.Board.Do("POST", inboxesPath(e), req3)
		if b := decodeErr(t, raw); st != 409 || b.Code != "agentmail_address_taken" {
			t.Fatalf("taken: %d %+v", st, b)
		}
		req3["username"] = "ralph2"
		e.Board.JSON("POST", inboxesPath(e), req3, 201)
		e.Board.JSON("POST", inboxesPath(e), req3, 201)
		for _, addr := range []string{"first@agentmail.to", "second@agentmail.to", "ralph2@agentmail.to"} {
			if n := endpointCount(t, e, addr); n != 1 {
				t.Fatalf("%s has %d endpoints", addr, n)
			}
		}
		creates := 0
		for _, r := range e.Em.Requests("/v0/inboxes") {
			if r.Method == "POST" && r.Path == "/v0/inboxes" && r.Status < 300 {
				creates++
			}
		}
		if creates != 4 { // first, second, ralph (test fixture), ralph2
			t.Fatalf("successful provider inbox creations: %d, want 4", creates)
		}
		noSecrets(t, e, privateText, e.OrgKey)
	})
}

// An unreachable provider is a 502 whose details still name the operation
// and the reason, never the provider URL.
func TestUnreachableProviderNamesTheOperation(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := testkit.NewEmailEnv(t, url, func(c *config.Config) {
			// Nothing listens on port 1 of the loopback address.
			c.AgentMailAPIURL = "http://127.0.0.1:1/v0"
		})
		st, raw := e.Board.Do("POST", "/api/companies/"+e.CompanyID+"/email/inspect", map[string]any{"apiKey": e.OrgKey})
		b := decodeErr(t, raw)
		if st != 502 || b.Code != "agentmail_request_failed" || b.Details["operation"] != "inspect_key" || b.Details["reason"] != "connection_refused" {
			t.Fatalf("unreachable provider: %d %s", st, raw)
		}
		if strings.Contains(string(raw), "127.0.0.1:1") {
			t.Fatalf("the provider URL leaked: %s", raw)
		}
	})
}
