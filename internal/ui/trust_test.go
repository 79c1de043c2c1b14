package ui_test

import (
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

var (
	checkLineRe = regexp.MustCompile(`<li class="(check-ok|check-no)">.*?</li>`)
	cancelRe    = regexp.MustCompile(`<a class="btn btn-ghost" href="([^"]*)">Cancel</a>`)
)

// checklist returns the trust page's runtime checklist lines by label:
// whether each is ticked and the fix link it offers ("" for none).
func checklist(t *testing.T, body string) map[string][2]string {
	t.Helper()
	out := map[string][2]string{}
	for _, m := range checkLineRe.FindAllStringSubmatch(body, -1) {
		link := ""
		if l := regexp.MustCompile(`<a href="([^"]+)">([^<]+)</a>`).FindStringSubmatch(m[0]); l != nil {
			link = l[2] + " " + l[1]
		}
		for _, label := range []string{"Isolated workspaces are on", "Active sandbox environment selected"} {
			if strings.Contains(m[0], label) {
				out[label] = [2]string{m[1], link}
			}
		}
	}
	if len(out) != 2 {
		t.Fatalf("runtime checklist lines: %v in %s", out, body)
	}
	return out
}

// The trust settings page: its runtime checklist follows the instance
// setting and the agent's environment, and ?return= brings the operator
// back to a local page only.
func TestTrustPageChecklistAndReturn(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, dbURL string) {
		e := startLocal(t, dbURL)
		f := e.seed("Trust")
		c := "/c/" + f.company
		trust := c + "/agents/" + f.agent + "/trust"
		project := testkit.ID(e.api.JSON("POST", "/api/companies/"+f.company+"/projects", map[string]string{"name": "Mail"}, 201))

		// Nothing set up yet: both lines unticked, each with its fix.
		p := e.get(trust)
		checkPage(t, trust, p)
		got := checklist(t, p.body)
		if want := [2]string{"check-no", "Instance settings /settings"}; got["Isolated workspaces are on"] != want {
			t.Errorf("isolated workspaces line: %v, want %v", got["Isolated workspaces are on"], want)
		}
		if want := [2]string{"check-no", "Edit agent " + c + "/agents/" + f.agent + "/edit"}; got["Active sandbox environment selected"] != want {
			t.Errorf("sandbox line: %v, want %v", got["Active sandbox environment selected"], want)
		}
		// A local environment, or an inactive sandbox, does not count.
		local := testkit.ID(e.api.JSON("POST", "/api/companies/"+f.company+"/environments", map[string]string{"name": "Host", "driver": "local"}, 201))
		e.api.JSON("PATCH", "/api/agents/"+f.agent, map[string]any{"environmentId": local}, 200)
		if got := checklist(t, e.get(trust).body); got["Active sandbox environment selected"][0] != "check-no" {
			t.Errorf("a local environment ticks the sandbox line")
		}
		idle := testkit.ID(e.api.JSON("POST", "/api/companies/"+f.company+"/environments", map[string]string{"name": "Idle",
			"driver": "sandbox", "provider": "bubblewrap", "status": "inactive"}, 201))
		e.api.JSON("PATCH", "/api/agents/"+f.agent, map[string]any{"environmentId": idle}, 200)
		if got := checklist(t, e.get(trust).body); got["Active sandbox environment selected"][0] != "check-no" {
			t.Errorf("an inactive sandbox ticks the sandbox line")
		}
		// Both in place: both ticked, no fix links.
		e.api.JSON("PATCH", "/api/instance/settings", map[string]any{"experimental": map[string]any{"enableIsolatedWorkspaces": true}}, 200)
		box := testkit.ID(e.api.JSON("POST", "/api/companies/"+f.company+"/environments", map[string]string{"name": "Box",
			"driver": "sandbox", "provider": "bubblewrap"}, 201))
		e.api.JSON("PATCH", "/api/agents/"+f.agent, map[string]any{"environmentId": box}, 200)
		got = checklist(t, e.get(trust).body)
		for label, line := range got {
			if line != [2]string{"check-ok", ""} {
				t.Errorf("%s: %v, want ticked without a link", label, line)
			}
		}

		// return=: a local path (here the email wizard's URL, query and
		// all) is kept in the form and the Cancel link, and saving goes there.
		back := c + "/apps/agentmail/setup/" + testkit.NewUUID() + "?step=agent&agent=" + f.agent
		p = e.get(trust + "?return=" + url.QueryEscape(back))
		checkPage(t, trust+"?return=…", p)
		if !strings.Contains(p.body, `name="return" value="`+html.EscapeString(back)+`"`) {
			t.Errorf("the form does not carry the return path")
		}
		if m := cancelRe.FindStringSubmatch(p.body); m == nil || html.UnescapeString(m[1]) != back {
			t.Errorf("Cancel link: %v, want %s", m, back)
		}
		form := url.Values{"preset": {"low_trust_review"}, "kind": {"project"}, "project": {project}, "return": {back}}
		if loc := location(t, e.post(trust, trust, form)); loc != back {
			t.Errorf("save returned to %s, want %s", loc, back)
		}
		if a := e.api.JSON("GET", "/api/agents/"+f.agent, nil, 200); a["permissions"].(map[string]any)["trustPreset"] != "low_trust_review" {
			t.Errorf("trust not saved: %v", a["permissions"])
		}
		// Without return=, saving goes to the agent.
		form.Del("return")
		form.Set("preset", "standard")
		if loc := location(t, e.post(trust, trust, form)); loc != c+"/agents/"+f.agent {
			t.Errorf("save without return went to %s", loc)
		}

		// The open-redirect guard: anything but a local UI path is dropped,
		// from the page and from the redirect after saving.
		for _, bad := range []string{"https://evil.example/x", "//evil.example/x", "/\\evil.example/x", "\\\\evil.example",
			"/\t/evil.example/x", "/\n/evil.example", "javascript:alert(1)", "http:/evil.example", "evil.example/x",
			"/ /evil.example", "/api/companies", "/static/app.js"} {
			p := e.get(trust + "?return=" + url.QueryEscape(bad))
			if p.status != http.StatusOK || strings.Contains(p.body, "evil.example") || strings.Contains(p.body, "javascript:") ||
				strings.Contains(p.body, `name="return"`) {
				t.Errorf("return=%q: kept on the page (%d)", bad, p.status)
			}
			if m := cancelRe.FindStringSubmatch(p.body); m == nil || m[1] != c+"/agents/"+f.agent {
				t.Errorf("return=%q: Cancel link %v", bad, m)
			}
			form.Set("return", bad)
			if loc := location(t, e.post(trust, trust, form)); loc != c+"/agents/"+f.agent {
				t.Errorf("return=%q: save redirected to %s", bad, loc)
			}
		}
		// A refused save (low trust without a boundary) keeps a good return.
		p = e.post(trust, trust, url.Values{"preset": {"low_trust_review"}, "kind": {"project"}, "return": {back}})
		if p.status != http.StatusUnprocessableEntity || !strings.Contains(p.body, "Choose a project or task boundary.") ||
			!strings.Contains(p.body, `name="return" value="`+html.EscapeString(back)+`"`) {
			t.Errorf("refused save: %d", p.status)
		}
	})
}
