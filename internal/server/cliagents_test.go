package server_test

import (
	"strings"
	"testing"

	"github.com/paperclipai/paperclipai/internal/config"
	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// CLI agent configuration: any company member chooses model and limits;
// what runs on the host (command, install directory, passed environment,
// egress destinations) and a sandbox's network are the instance
// administrator's.
func TestCLIAgentConfigurationAuthority(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) { testCLIAgentConfigurationAuthority(t, url) })
}

func testCLIAgentConfigurationAuthority(t *testing.T, url string) {
	cfg := testkit.Config(t, url)
	cfg.DeploymentMode = config.ModeAuthenticated
	inst := testkit.Start(t, cfg)
	ctx := t.Context()
	admin, err := inst.Store.EnsureUser(ctx, inst.DB, "ops@example.com", "Ops", true)
	if err != nil {
		t.Fatal(err)
	}
	_, adminKey, _ := inst.Store.CreateBoardKey(ctx, inst.DB, admin.ID, "", "ops")
	ownerUser, _ := inst.Store.EnsureUser(ctx, inst.DB, "owner@example.com", "Owner", false)
	_, ownerKey, _ := inst.Store.CreateBoardKey(ctx, inst.DB, ownerUser.ID, "", "owner")
	anon := testkit.NewClient(t, inst.URL())
	ops, owner := anon.As(adminKey, ""), anon.As(ownerKey, "")
	cid := testkit.ID(ops.JSON("POST", "/api/companies", map[string]any{"name": "Co"}, 201))
	if _, err := inst.Store.PutMembership(ctx, inst.DB, cid, ownerUser.ID, "owner", nil); err != nil {
		t.Fatal(err)
	}
	agents := "/api/companies/" + cid + "/agents"
	if a := owner.JSON("POST", agents, map[string]any{"name": "Claude", "adapterType": "claude_local"}, 201); a["hostExecutionApproved"] != false {
		t.Fatalf("a member's CLI agent may run only in a sandbox: %v", a)
	}
	approved := ops.JSON("POST", agents, map[string]any{"name": "Approved", "adapterType": "claude_local",
		"adapterConfig": map[string]any{"allowedTools": []string{"Read"}}}, 201)
	if approved["hostExecutionApproved"] != true {
		t.Fatalf("an administrator's CLI agent runs on the host: %v", approved)
	}
	path := "/api/agents/" + testkit.ID(approved)
	if a := owner.JSON("PATCH", path, map[string]any{"adapterConfig": map[string]any{"model": "opus", "allowedTools": []string{"Read"}}}, 200); a["hostExecutionApproved"] != true {
		t.Fatalf("changing the model keeps the approval: %v", a)
	}
	if a := owner.JSON("PATCH", path, map[string]any{"adapterConfig": map[string]any{"allowedTools": []string{"Bash"}}}, 200); a["hostExecutionApproved"] != false {
		t.Fatalf("a member's allowedTools withdraw the approval: %v", a)
	}
	codex := owner.JSON("POST", agents, map[string]any{"name": "Codex", "adapterType": "codex_local",
		"adapterConfig": map[string]any{"model": "gpt-5-codex", "pricing": map[string]any{"inputPerMTok": 1.25, "outputPerMTok": 10}}}, 201)
	if c := codex["adapterConfig"].(map[string]any); c["model"] != "gpt-5-codex" {
		t.Fatalf("config: %v", c)
	}
	for _, bad := range []struct {
		typ  string
		cfg  map[string]any
		want string
	}{
		{"claude_local", map[string]any{"command": "/bin/sh"}, "unknown field"},
		{"claude_local", map[string]any{"env": map[string]string{"NODE_OPTIONS": "--require /tmp/x"}}, "unknown field"},
		{"claude_local", map[string]any{"allowedTools": []string{"--dangerously-skip-permissions"}}, "allowedTools"},
		{"codex_local", map[string]any{"maxTurns": 3}, "claude_local only"},
	} {
		st, body := owner.Do("POST", agents, map[string]any{"name": "X", "adapterType": bad.typ, "adapterConfig": bad.cfg})
		if st != 400 || !strings.Contains(string(body), bad.want) {
			t.Fatalf("%s %v: %d %s", bad.typ, bad.cfg, st, body)
		}
	}
	settings := map[string]any{"agentCli": map[string]any{"claude_local": map[string]any{"command": "/usr/local/bin/claude",
		"passEnv": []string{"ANTHROPIC_API_KEY"}}}}
	if st, _ := owner.Do("PATCH", "/api/instance/settings", settings); st != 403 {
		t.Fatalf("a company owner set the CLI command: %d", st)
	}
	got := ops.JSON("PATCH", "/api/instance/settings", settings, 200)
	if c := got["agentCli"].(map[string]any)["claude_local"].(map[string]any); c["command"] != "/usr/local/bin/claude" {
		t.Fatalf("settings: %v", got)
	}
	for _, bad := range []map[string]any{
		{"agentCli": map[string]any{"claude_local": map[string]any{"passEnv": []string{"PAPERCLIP_MASTER_KEY"}}}},
		{"agentCli": map[string]any{"cursor_local": map[string]any{}}},
		{"agentCli": map[string]any{"codex_local": map[string]any{"installDir": "relative"}}},
	} {
		if st, body := ops.Do("PATCH", "/api/instance/settings", bad); st != 400 {
			t.Fatalf("%v: %d %s", bad, st, body)
		}
	}
	envs := "/api/companies/" + cid + "/environments"
	if st, body := owner.Do("POST", envs, map[string]any{"name": "Net", "driver": "sandbox", "allowNetwork": true}); st != 403 {
		t.Fatalf("a company owner allowed network: %d %s", st, body)
	}
	sb := testkit.ID(owner.JSON("POST", envs, map[string]any{"name": "Box", "driver": "sandbox"}, 201))
	if st, _ := owner.Do("PATCH", "/api/environments/"+sb, map[string]any{"allowNetwork": true}); st != 403 {
		t.Fatalf("a company owner allowed network: %d", st)
	}
	if e := ops.JSON("PATCH", "/api/environments/"+sb, map[string]any{"allowNetwork": true}, 200); e["allowNetwork"] != true {
		t.Fatalf("environment: %v", e)
	}
	if e := owner.JSON("PATCH", "/api/environments/"+sb, map[string]any{"allowNetwork": false}, 200); e["allowNetwork"] != false {
		t.Fatalf("an owner may always turn the network off: %v", e)
	}
}
