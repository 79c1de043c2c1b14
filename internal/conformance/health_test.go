package conformance_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/emulator"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// health waits until the inbox's health code is code and returns the
// summary.
func (e *env) health(endpointID, code string) map[string]any {
	e.t.Helper()
	var sum map[string]any
	ok := false
	for deadline := time.Now().Add(wait); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if sum = e.Board.JSON("GET", "/api/email/inboxes/"+endpointID, nil, 200); sum["healthCode"] == code {
			ok = true
			break
		}
	}
	if !ok {
		e.t.Fatalf("inbox health is not %s after %s: %v", code, wait, sum)
	}
	return sum
}

// mustMention fails unless the summary's health message contains want and
// its last error contains wantError (wantError "": lastError is null).
func mustMention(t *testing.T, sum map[string]any, want, wantError string) {
	t.Helper()
	if msg, _ := sum["healthMessage"].(string); !strings.Contains(msg, want) {
		t.Fatalf("healthMessage %q does not say %q", msg, want)
	}
	le, _ := sum["lastError"].(string)
	if wantError != "" && !strings.Contains(le, wantError) {
		t.Fatalf("lastError %q does not say %q", le, wantError)
	}
	if wantError == "" && sum["lastError"] != nil {
		t.Fatalf("lastError = %v, want null", sum["lastError"])
	}
}

// Every inbox problem shows in its health with a plain reason: paused, a
// saved credential's install or grant revoked, a key this server cannot
// decrypt, a failed setup left as a draft (which gives the agent no access
// and can be discarded), and an agent whose runs on the inbox's mail fail.
// A healthy inbox names the replica holding its live connection.
func TestInboxHealth(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := newEnv(t, url)
		e.connect("healthy", nil)
		sum := e.health(e.ep, "connected")
		testkit.MustEqual(t, "health", sum["health"], any("ok"))
		if owner, _ := sum["socketOwner"].(string); owner == "" {
			t.Fatalf("a connected WebSocket inbox names no socket owner: %v", sum)
		}
		testkit.MustEqual(t, "no event yet", sum["lastEventAt"], nil)
		// `paperclipai email status` shows the same, and exits 0.
		code, out, stderr := e.cli(nil, "email", "status")
		if code != 0 || !strings.Contains(out, "healthy@agentmail.to  ok (connected)") || !strings.Contains(out, "agent:      Mail Agent ("+e.AgentID+")") ||
			!strings.Contains(out, "  health:     Connected") || !strings.Contains(out, "  socket:     "+sum["socketOwner"].(string)) ||
			!strings.Contains(out, "  last event: never") {
			t.Fatalf("email status: %d %s %s", code, out, stderr)
		}
		e.deliver(emulator.DeliverRequest{Subject: "First", Text: "hello"})
		e.task("First")
		testkit.Eventually(t, wait, "lastEventAt", func() bool { return e.inbox()["lastEventAt"] != nil })
		if e.inbox()["lastSyncAt"] == nil {
			t.Fatal("no catch-up time")
		}

		e.Control(t, e.ep, "pause")
		sum = e.health(e.ep, "paused")
		testkit.MustEqual(t, "paused health", sum["health"], any("paused"))
		mustMention(t, sum, "Paused", "")
		testkit.MustEqual(t, "paused socket owner", sum["socketOwner"], nil)
		e.Control(t, e.ep, "resume")
		e.health(e.ep, "connected")

		// A key sealed with another master key (or damaged).
		var secretID string
		if err := e.DB.QueryRowContext(context.Background(), `SELECT secret_id FROM company_secret_bindings
			WHERE target_id = $1 AND config_path = 'credentials.apiKey'`, e.ep).Scan(&secretID); err != nil {
			t.Fatal(err)
		}
		var sealed string
		if err := e.DB.QueryRowContext(context.Background(), `SELECT sealed FROM company_secret_versions WHERE secret_id = $1`, secretID).Scan(&sealed); err != nil {
			t.Fatal(err)
		}
		setSealed := func(v string) {
			t.Helper()
			if _, err := e.DB.ExecContext(context.Background(), `UPDATE company_secret_versions SET sealed = $2 WHERE secret_id = $1`, secretID, v); err != nil {
				t.Fatal(err)
			}
		}
		setSealed("v1.00000000.AAAA.AAAA")
		sum = e.health(e.ep, "credential_undecryptable")
		testkit.MustEqual(t, "undecryptable health", sum["health"], any("attention"))
		mustMention(t, sum, "cannot be decrypted with this server's master key", "cannot be decrypted")
		// Paused, the reason stays visible (resuming would fail); with the
		// key back, resuming reconnects.
		e.Control(t, e.ep, "pause")
		sum = e.health(e.ep, "paused")
		mustMention(t, sum, "Resuming will fail: The inbox's AgentMail key cannot be decrypted", "cannot be decrypted")
		setSealed(sealed)
		e.Control(t, e.ep, "resume")
		e.health(e.ep, "connected")

		// A saved credential: revoking the agent's install, then the last
		// grant, each shows with its own reason.
		conns := "/api/companies/" + e.CompanyID + "/email/connections"
		conn := e.Board.JSON("POST", conns, map[string]any{"apiKey": e.OrgKey, "grantKind": "organization",
			"agentIds": []string{e.AgentID}, "idempotencyKey": testkit.NewUUID()}, 201)
		cid := testkit.ID(conn)
		saved := e.Setup("fromsaved", map[string]any{"apiKey": nil, "credentialConnectionId": cid})
		sid := testkit.ID(saved)
		e.health(sid, "connected")
		conn = e.Board.JSON("GET", conns+"/"+cid, nil, 200)
		inst := conn["installs"].([]any)[0].(map[string]any)["id"].(string)
		e.Board.JSON("DELETE", conns+"/"+cid+"/installs/"+inst, nil, 204)
		sum = e.health(sid, "agent_access_revoked")
		mustMention(t, sum, "no longer has access to the saved AgentMail credential", "no longer has access")
		e.Board.JSON("POST", conns+"/"+cid+"/installs", map[string]any{"targetType": "agent", "targetId": e.AgentID}, 201)
		e.health(sid, "connected")
		grant := conn["grants"].([]any)[0].(map[string]any)["id"].(string)
		// (Last: nobody can use the credential any more, not even to
		// grant it again.)
		defer func() {
			e.Board.JSON("DELETE", conns+"/"+cid+"/grants/"+grant, nil, 204)
			sum := e.health(sid, "grant_revoked")
			mustMention(t, sum, "grant of the saved AgentMail credential", "was revoked")
		}()

		// A failed setup from a saved credential leaves a draft listed as
		// "Setup incomplete" with the reason, and gives the (new) agent
		// no access to the credential; discarding it works.
		other := testkit.ID(e.Board.JSON("POST", "/api/companies/"+e.CompanyID+"/agents", map[string]any{"name": "Second",
			"adapterType": "process", "adapterConfig": map[string]any{"command": "/bin/true"}}, 201))
		e.Em.AddFault(emulator.Fault{Match: emulator.FaultMatch{Operation: "create_inbox"}, Status: 409, Code: "resource_taken", Times: 1})
		st, body := e.Board.Do("POST", "/api/companies/"+e.CompanyID+"/email/inboxes", map[string]any{"assignedAgentId": other,
			"credentialConnectionId": cid, "username": "taken", "idempotencyKey": testkit.NewUUID()})
		if st < 400 {
			t.Fatalf("setup with a refused inbox creation: %d %s", st, body)
		}
		var draft map[string]any
		for _, ib := range e.Board.List("/api/companies/" + e.CompanyID + "/email/inboxes") {
			if ib["assignedAgentId"] == other {
				draft = ib
			}
		}
		if draft == nil {
			t.Fatal("the failed setup's draft is not listed")
		}
		testkit.MustEqual(t, "draft health", draft["health"], any("setup_incomplete"))
		if le, _ := draft["lastError"].(string); le == "" || !strings.HasPrefix(draft["healthMessage"].(string), "Setup incomplete: "+strings.TrimSuffix(le, ".")) {
			t.Fatalf("the draft's health does not give the setup error: %v", draft)
		}
		code, out, stderr = e.cli(nil, "email", "status")
		if code != 3 || !strings.Contains(out, "(no address: setup incomplete)  setup_incomplete (setup_incomplete)") ||
			!strings.Contains(out, "Setup incomplete: "+strings.TrimSuffix(draft["lastError"].(string), ".")) {
			t.Fatalf("email status with a failed setup: %d %s %s", code, out, stderr)
		}
		code, out, _ = e.cli(nil, "email", "status", "--json")
		var listed []map[string]any
		if code != 3 || json.Unmarshal([]byte(out), &listed) != nil || len(listed) < 3 {
			t.Fatalf("email status --json: %d %s", code, out)
		}
		for _, i := range e.Board.JSON("GET", conns+"/"+cid, nil, 200)["installs"].([]any) {
			if i.(map[string]any)["targetId"] == other {
				t.Fatal("a failed setup gave its agent access to the saved credential")
			}
		}
		removed := e.Control(t, testkit.ID(draft), "remove")
		testkit.MustEqual(t, "discarded draft", removed.Status, "archived")
		for _, ib := range e.Board.List("/api/companies/" + e.CompanyID + "/email/inboxes") {
			if ib["id"] == testkit.ID(draft) {
				t.Fatal("a discarded draft is still listed")
			}
		}

		// An agent whose run on the inbox's mail fails.
		failing := testkit.ID(e.Board.JSON("POST", "/api/companies/"+e.CompanyID+"/agents", map[string]any{"name": "Failing",
			"adapterType": "process", "adapterConfig": map[string]any{"command": "/bin/false"}}, 201))
		fenv := *e.EmailEnv
		fenv.AgentID = failing
		fe := &env{EmailEnv: &fenv, t: t}
		fe.connect("failing", nil)
		fe.deliver(emulator.DeliverRequest{Subject: "Please answer", Text: "anyone?"})
		task := fe.task("Please answer")
		sum = fe.health(fe.ep, "agent_run_failed")
		mustMention(t, sum, `"Please answer" failed: process exited with code 1`, "process exited with code 1")
		if sum["lastErrorAt"] == nil {
			t.Fatal("a failed run's time is not given")
		}
		e.Board.JSON("PATCH", "/api/agents/"+failing, map[string]any{"adapterConfig": map[string]any{"command": "/bin/true"}}, 200)
		e.Board.JSON("POST", "/api/agents/"+failing+"/wakeup", map[string]any{"reason": "retry", "issueId": task}, 202)
		fe.health(fe.ep, "connected")
	})
}
