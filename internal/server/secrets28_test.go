package server_test

import (
	"strings"
	"testing"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// Issue 28 item 2: a member PATCHed an administrator's agent with a new
// command (or http URL) and sent "********" for the stored env (headers):
// the approval was withdrawn, but the vaulted values went to the member's
// command or host. Now the mask is refused when anyone but an instance
// administrator changes a host-executing setting; leaving the value out
// drops it, and an administrator may still keep values across a change.
func TestMaskedSecretsNeverFollowAChangedCommand(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := setup(t, url)
		cid := e.company("Secrets Co")
		mc := e.member(cid, "member@example.com", "member")
		canary := "canary-" + testkit.NewUUID()
		aid := testkit.ID(e.board.JSON("POST", "/api/companies/"+cid+"/agents", map[string]any{"name": "Ops", "adapterType": "process",
			"adapterConfig": map[string]any{"command": "/bin/echo", "args": []string{"hi"}, "env": map[string]string{"TOKEN": canary}}}, 201))
		steal := []map[string]any{
			{"command": "/bin/sh", "args": []string{"-c", `echo "$TOKEN" | base64`}, "env": map[string]string{"TOKEN": "********"}},
			{"command": "/bin/echo", "args": []string{"$TOKEN"}, "env": map[string]string{"TOKEN": "********"}},
			{"command": "/bin/echo", "args": []string{"hi"}, "cwd": "/tmp", "env": map[string]string{"TOKEN": "********"}},
			// The same command with a planted environment (BASH_ENV, LD_PRELOAD…).
			{"command": "/bin/echo", "args": []string{"hi"}, "env": map[string]string{"TOKEN": "********", "BASH_ENV": "/tmp/x"}},
		}
		for _, cfg := range steal {
			st, body := mc.Do("PATCH", "/api/agents/"+aid, map[string]any{"adapterConfig": cfg})
			if st != 400 || !strings.Contains(string(body), "adapterConfig.env.TOKEN") || !strings.Contains(string(body), "not kept") {
				t.Fatalf("member's %v with the mask: %d %s", cfg, st, body)
			}
		}
		if st, body := mc.Do("PATCH", "/api/agents/"+aid, map[string]any{"adapterType": "http",
			"adapterConfig": map[string]any{"url": "https://example.com/", "headers": map[string]string{"TOKEN": "********"}}}); st != 400 {
			t.Fatalf("member's type change with the mask: %d %s", st, body)
		}
		got := e.board.JSON("GET", "/api/agents/"+aid, nil, 200)
		if got["hostExecutionApproved"] != true || got["adapterConfig"].(map[string]any)["command"] != "/bin/echo" {
			t.Fatalf("a refused change altered the agent: %v", got)
		}
		// Leaving the value out drops it with the change.
		mc.JSON("PATCH", "/api/agents/"+aid, map[string]any{"adapterConfig": map[string]any{"command": "/bin/sh", "args": []string{"-c", "env"}}}, 200)
		if _, ok := e.board.JSON("GET", "/api/agents/"+aid, nil, 200)["adapterConfig"].(map[string]any)["env"]; ok {
			t.Fatalf("the stored env survived the member's command change")
		}
		bound, err := e.inst.Vault.ResolveBound(t.Context(), e.inst.DB, "agent", aid)
		if err != nil || len(bound) != 0 {
			t.Fatalf("vaulted values still bound to the agent: %d %v", len(bound), err)
		}

		// An http agent's vaulted headers never go to a member's new URL.
		hid := testkit.ID(e.board.JSON("POST", "/api/companies/"+cid+"/agents", map[string]any{"name": "Hook", "adapterType": "http",
			"adapterConfig": map[string]any{"url": "http://127.0.0.1:9/hook", "headers": map[string]string{"X-Api-Key": canary}}}, 201))
		st, body := mc.Do("PATCH", "/api/agents/"+hid, map[string]any{"adapterConfig": map[string]any{"url": "https://collector.example.com/",
			"headers": map[string]string{"X-Api-Key": "********"}}})
		if st != 400 || !strings.Contains(string(body), "adapterConfig.headers.X-Api-Key") {
			t.Fatalf("member's new URL with the masked header: %d %s", st, body)
		}
		// A member's change of non-executing settings keeps the values, and
		// an administrator may keep them across a change.
		mc.JSON("PATCH", "/api/agents/"+hid, map[string]any{"adapterConfig": map[string]any{"url": "http://127.0.0.1:9/hook", "timeoutSec": 5,
			"headers": map[string]string{"X-Api-Key": "********"}}}, 200)
		e.board.JSON("PATCH", "/api/agents/"+hid, map[string]any{"adapterConfig": map[string]any{"url": "http://127.0.0.1:10/hook",
			"headers": map[string]string{"X-Api-Key": "********"}}}, 200)
		if bound, err := e.inst.Vault.ResolveBound(t.Context(), e.inst.DB, "agent", hid); err != nil || bound["headers.X-Api-Key"] != canary {
			t.Fatalf("the administrator's kept header: %v", err)
		}
	})
}
