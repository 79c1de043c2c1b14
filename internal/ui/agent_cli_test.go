package ui_test

import (
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// browser returns another signed-out browser on the same server.
func (e *env) browser() *env {
	jar, _ := cookiejar.New(nil)
	cp := *e
	cp.http = &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return &cp
}

// claudeForm is the edit form of a Claude Code agent as a browser submits
// it (every field of the page, the other adapters' fields empty).
func claudeForm(name, model, budget string) url.Values {
	return url.Values{"name": {name}, "status": {"active"}, "adapter": {"claude_local"}, "claudeModel": {model},
		"allowedTools": {"Read"}, "maxTurns": {"30"}, "timeout": {"900"}, "budget": {budget}, "trust": {"standard"},
		"kind": {"project"}, "command": {""}, "args": {""}, "env": {""}, "url": {""}, "headers": {""}, "codexModel": {""}}
}

// Issue 15 in the web UI: members create and edit Claude Code and Codex
// agents; editing one (a rename, a budget) keeps its adapter and config;
// the command, install directory, passed variables and egress hosts are
// instance settings shown to and written by instance administrators only;
// the agent and run pages show the adapter, model, session and cost.
func TestCLIAgentForms(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, dbURL string) {
		e, adminKey, cid := startAuth(t, dbURL)
		fake := testkit.FakeCLIs(t)
		c := "/c/" + cid
		e.api.JSON("PATCH", "/api/instance/settings", map[string]any{"agentCli": map[string]any{"claude_local": map[string]any{
			"command": filepath.Join(fake, "claude"), "passEnv": []string{"ANTHROPIC_API_KEY"}}}}, 200)
		agent := e.api.JSON("POST", "/api/companies/"+cid+"/agents", map[string]any{"name": "Claude", "adapterType": "claude_local",
			"adapterConfig":      map[string]any{"model": "sonnet", "maxTurns": 30, "timeoutSec": 900, "allowedTools": []string{"Read"}},
			"budgetMonthlyCents": 2000}, 201)
		aid := testkit.ID(agent)
		settings := func() map[string]any {
			return e.api.JSON("GET", "/api/instance/settings", nil, 200)["agentCli"].(map[string]any)["claude_local"].(map[string]any)
		}

		// A member: CLI adapters offered, instance settings never shown.
		memberKey, _ := e.boardUser("member@example.com", cid, "member", false)
		m := e.browser()
		if p := m.login(memberKey); p.status != http.StatusSeeOther {
			t.Fatalf("member login: %d", p.status)
		}
		for _, path := range []string{c + "/agents/new", c + "/agents/" + aid + "/edit"} {
			p := m.get(path)
			checkPage(t, path, p)
			for _, want := range []string{`value="claude_local"`, `value="codex_local"`, `name="claudeModel"`, `name="maxTurns"`, `name="priceInput"`} {
				if !strings.Contains(p.body, want) {
					t.Errorf("%s lacks %s", path, want)
				}
			}
			for _, bad := range []string{"claude_local.command", "installDir", "passEnv", "egressHosts", "Instance setting", fake, "ANTHROPIC_API_KEY"} {
				if strings.Contains(p.body, bad) {
					t.Errorf("%s shows a member the instance setting (%q)", path, bad)
				}
			}
		}
		edit := m.get(c + "/agents/" + aid + "/edit").body
		for _, want := range []string{`id="adapter-claude" name="adapter" value="claude_local" data-toggles checked`, `name="claudeModel" value="sonnet"`,
			">Read</textarea>", `name="maxTurns" inputmode="numeric" value="30"`, `name="timeout" inputmode="numeric" value="900"`} {
			if !strings.Contains(edit, want) {
				t.Errorf("the edit form lacks %s", want)
			}
		}

		// A member's budget change is refused (budgets are owners' and
		// admins', issue 28); a rename keeps the adapter, its config, the
		// budget and the host approval; a forged instance setting is ignored.
		if p := m.post(c+"/agents/"+aid+"/edit", c+"/agents/"+aid, claudeForm("Claude", "sonnet", "99")); p.status != http.StatusForbidden {
			t.Fatalf("member budget change: %d", p.status)
		}
		f := claudeForm("Claude Code agent", "sonnet", "20")
		f.Set("claude_local.command", "/tmp/evil")
		f.Set("claude_local.passEnv", "PGPASSWORD")
		if p := m.post(c+"/agents/"+aid+"/edit", c+"/agents/"+aid, f); p.status != http.StatusSeeOther {
			t.Fatalf("member rename: %d %s", p.status, p.body)
		}
		got := e.api.JSON("GET", "/api/agents/"+aid, nil, 200)
		cfg := got["adapterConfig"].(map[string]any)
		if got["name"] != "Claude Code agent" || got["budgetMonthlyCents"] != float64(2000) || got["adapterType"] != "claude_local" ||
			cfg["model"] != "sonnet" || cfg["maxTurns"] != float64(30) || cfg["timeoutSec"] != float64(900) || got["hostExecutionApproved"] != true {
			t.Fatalf("after a member's rename: %v", got)
		}
		if s := settings(); s["command"] != filepath.Join(fake, "claude") || len(s["passEnv"].([]any)) != 1 {
			t.Fatalf("a member's form changed the instance settings: %v", s)
		}
		// A model change writes the config (and keeps the approval: the
		// tools did not change).
		if p := m.post(c+"/agents/"+aid+"/edit", c+"/agents/"+aid, claudeForm("Claude Code agent", "opus", "20")); p.status != http.StatusSeeOther {
			t.Fatalf("member model change: %d %s", p.status, p.body)
		}
		got = e.api.JSON("GET", "/api/agents/"+aid, nil, 200)
		if got["adapterConfig"].(map[string]any)["model"] != "opus" || got["hostExecutionApproved"] != true {
			t.Fatalf("after a model change: %v", got)
		}
		// Bad input: a clear error, nothing written.
		bad := claudeForm("Renamed again", "opus", "20")
		bad.Set("maxTurns", "lots")
		if p := m.post(c+"/agents/"+aid+"/edit", c+"/agents/"+aid, bad); p.status != http.StatusBadRequest || !strings.Contains(p.body, "Max turns must be a whole number") {
			t.Fatalf("bad max turns: %d", p.status)
		}
		if e.api.JSON("GET", "/api/agents/"+aid, nil, 200)["name"] != "Claude Code agent" {
			t.Fatal("a refused form changed the agent")
		}
		// A Codex agent from the form, with its prices.
		codex := url.Values{"name": {"Codex"}, "adapter": {"codex_local"}, "codexModel": {"gpt-5-codex"}, "priceInput": {"1.25"},
			"priceCached": {"0.125"}, "priceOutput": {"10"}, "timeout": {"600"}, "budget": {""}, "trust": {"standard"}, "kind": {"project"}}
		p := m.post(c+"/agents/new", c+"/agents", codex)
		if p.status != http.StatusSeeOther {
			t.Fatalf("create a Codex agent: %d %s", p.status, p.body)
		}
		cx := e.api.JSON("GET", "/api/agents/"+strings.TrimPrefix(p.header.Get("Location"), c+"/agents/"), nil, 200)
		ccfg := cx["adapterConfig"].(map[string]any)
		if cx["adapterType"] != "codex_local" || ccfg["model"] != "gpt-5-codex" || ccfg["timeoutSec"] != float64(600) ||
			ccfg["pricing"].(map[string]any)["cachedInputPerMTok"] != 0.125 || cx["hostExecutionApproved"] != false {
			t.Fatalf("Codex agent: %v", cx)
		}
		page := m.get(p.header.Get("Location")).body
		for _, want := range []string{"Codex adapter", "gpt-5-codex", "$1.25 input · $0.125 cached input · $10 output per million tokens",
			"Not approved: runs only in a sandbox environment"} {
			if !strings.Contains(page, want) {
				t.Errorf("the Codex agent's page lacks %q", want)
			}
		}
		// Renaming it keeps its pricing.
		codex.Set("name", "Codex agent")
		if p := m.post(p.header.Get("Location")+"/edit", p.header.Get("Location"), codex); p.status != http.StatusSeeOther {
			t.Fatalf("rename the Codex agent: %d %s", p.status, p.body)
		}
		if cx := e.api.JSON("GET", "/api/agents/"+testkit.ID(cx), nil, 200); cx["name"] != "Codex agent" || cx["adapterConfig"].(map[string]any)["pricing"] == nil {
			t.Fatalf("renamed Codex agent: %v", cx)
		}

		// An instance administrator sees and writes the setting.
		a := e.browser()
		if p := a.login(adminKey); p.status != http.StatusSeeOther {
			t.Fatalf("admin login: %d", p.status)
		}
		adminEdit := a.get(c + "/agents/" + aid + "/edit").body
		for _, want := range []string{`name="claude_local.command" value="` + filepath.Join(fake, "claude") + `"`, ">ANTHROPIC_API_KEY</textarea>",
			`name="codex_local.command" value=""`, "Instance setting (instance administrators only)"} {
			if !strings.Contains(adminEdit, want) {
				t.Errorf("the administrator's form lacks %s", want)
			}
		}
		f = claudeForm("Refused", "opus", "20")
		f.Set("claude_local.command", filepath.Join(fake, "claude"))
		f.Set("claude_local.passEnv", "PAPERCLIP_SECRETS_MASTER_KEY")
		f.Set("claude_local.installDir", "")
		f.Set("claude_local.egressHosts", "")
		if p := a.post(c+"/agents/"+aid+"/edit", c+"/agents/"+aid, f); p.status != http.StatusBadRequest || !strings.Contains(p.body, "passEnv may not pass") {
			t.Fatalf("a refused instance setting: %d", p.status)
		}
		if e.api.JSON("GET", "/api/agents/"+aid, nil, 200)["name"] != "Claude Code agent" {
			t.Fatal("a refused instance setting let the agent change")
		}
		f.Set("name", "Claude Code agent")
		f.Set("claude_local.passEnv", "ANTHROPIC_API_KEY\nCLAUDE_CODE_OAUTH_TOKEN")
		f.Set("claude_local.egressHosts", "gateway.example.com:443")
		if p := a.post(c+"/agents/"+aid+"/edit", c+"/agents/"+aid, f); p.status != http.StatusSeeOther {
			t.Fatalf("administrator's save: %d %s", p.status, p.body)
		}
		if s := settings(); len(s["passEnv"].([]any)) != 2 || s["egressHosts"].([]any)[0] != "gateway.example.com:443" {
			t.Fatalf("instance setting after the administrator's save: %v", s)
		}

		// A run: the fake Claude Code (no inbox, so nothing to answer)
		// reports its session and cost; both pages show them.
		task := testkit.ID(e.api.JSON("POST", "/api/companies/"+cid+"/issues", map[string]any{"title": "Look", "assigneeAgentId": aid}, 201))
		run := testkit.ID(e.api.JSON("POST", "/api/agents/"+aid+"/wakeup", map[string]string{"reason": "manual", "issueId": task}, 202))
		var r map[string]any
		testkit.Eventually(t, 60*time.Second, "the CLI run", func() bool {
			r = e.api.JSON("GET", "/api/heartbeat-runs/"+run, nil, 200)
			return r["status"] != "queued" && r["status"] != "running"
		})
		sid, _ := r["sessionId"].(string)
		if r["status"] != "succeeded" || sid == "" {
			t.Fatalf("run: %v", r)
		}
		rp := m.get(c + "/runs/" + run)
		checkPage(t, "run page", rp)
		for _, want := range []string{"<dt>Adapter</dt><dd>Claude Code</dd>", `<dd class="mono">opus</dd>`, sid, "$0.0123",
			"1,200 in · 4,000 cached · 300 cache writes · 250 out"} {
			if !strings.Contains(rp.body, want) {
				t.Errorf("the run page lacks %q", want)
			}
		}
		ap := m.get(c + "/agents/" + aid)
		for _, want := range []string{"Claude Code adapter", `<dd class="mono">opus</dd>`, "Read", ">Session</th>", sid[:8], "$0.0123",
			"Approved by an instance administrator", "Spent this month</dt><dd>$0.01"} {
			if !strings.Contains(ap.body, want) {
				t.Errorf("the agent page lacks %q", want)
			}
		}
	})
}
