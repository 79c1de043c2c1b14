package server_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
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

// Issue 28 item 12: an http agent URL's userinfo and query (where hook
// credentials travel) are write-only like env: vaulted, shown masked to
// everyone, put back only for the request itself, and kept by sending
// the masked URL back.
func TestHTTPAgentURLCredentialsAreWriteOnly(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := setup(t, url)
		cid := e.company("Hook Co")
		var mu sync.Mutex
		var gotQuery, gotUser, gotPass string
		hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			gotQuery = r.URL.RawQuery
			gotUser, gotPass, _ = r.BasicAuth()
			mu.Unlock()
		}))
		defer hook.Close()
		canary := "canary" + strings.ReplaceAll(testkit.NewUUID(), "-", "")
		target := strings.Replace(hook.URL, "://", "://hookuser:"+canary+"u@", 1) + "/hook?token=" + canary + "q"
		created := e.board.JSON("POST", "/api/companies/"+cid+"/agents", map[string]any{"name": "Hook", "adapterType": "http",
			"adapterConfig": map[string]any{"url": target}}, 201)
		aid := testkit.ID(created)
		want := "http://********@" + strings.TrimPrefix(hook.URL, "http://") + "/hook?********"
		viewer := e.member(cid, "viewer@example.com", "viewer")
		for who, c := range map[string]*testkit.Client{"admin": e.board, "viewer": viewer} {
			_, body := c.Do("GET", "/api/agents/"+aid, nil)
			if strings.Contains(string(body), canary) || !strings.Contains(string(body), `"url":"`+want+`"`) {
				t.Fatalf("%s reads the URL: %s", who, body)
			}
		}
		if strings.Contains(fmt.Sprint(created), canary) {
			t.Fatalf("the create answer shows the URL's credentials: %v", created)
		}
		var stored string
		if err := e.inst.DB.QueryRowContext(t.Context(), `SELECT adapter_config FROM agents WHERE id = $1`, aid).Scan(&stored); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(stored, canary) {
			t.Fatalf("the agent row holds the URL's credentials: %s", stored)
		}
		// The run's request carries them.
		run := e.board.JSON("POST", "/api/agents/"+aid+"/wakeup", map[string]any{"reason": "try"}, 202)
		e.waitRun(testkit.ID(run), "succeeded")
		mu.Lock()
		if gotQuery != "token="+canary+"q" || gotUser != "hookuser" || gotPass != canary+"u" {
			t.Errorf("the hook got query %q, user %q, password %q", gotQuery, gotUser, gotPass)
		}
		mu.Unlock()
		// Sending the masked URL back keeps them; a member moving the URL
		// elsewhere cannot take them along.
		e.board.JSON("PATCH", "/api/agents/"+aid, map[string]any{"adapterConfig": map[string]any{"url": want, "timeoutSec": 30}}, 200)
		bound, err := e.inst.Vault.ResolveBound(t.Context(), e.inst.DB, "agent", aid)
		if err != nil || bound["url.query"] != "token="+canary+"q" || bound["url.userinfo"] != "hookuser:"+canary+"u" {
			t.Fatalf("kept URL credentials: %v", err)
		}
		mc := e.member(cid, "member@example.com", "member")
		if st, body := mc.Do("PATCH", "/api/agents/"+aid, map[string]any{"adapterConfig": map[string]any{"url": "https://********@collector.example.com/x?********"}}); st != 400 {
			t.Fatalf("member moving the masked URL: %d %s", st, body)
		}
	})
}
