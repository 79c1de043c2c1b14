package e2e_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/config"
	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/store"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// agentScript is the process the journey's agent runs: it prints, works a
// little (so "Running" is observable) and finishes.
const agentScript = "echo hello from the agent for task $PAPERCLIP_TASK_ID; sleep 1; echo finished"

// TestUIJourney is the operator's first session, all in the browser: a
// company, an agent and a task; a comment that wakes the agent; the run
// appearing and finishing without a reload; its log; members and settings.
func TestUIJourney(t *testing.T) {
	t.Parallel()
	dbtest.EachURL(t, func(t *testing.T, dialect db.Dialect, dbURL string) {
		t.Parallel()
		inst := startUIServer(t, dbURL, config.ModeLocalTrusted)
		api := testkit.NewClient(t, inst.URL())
		b := newBrowser(t, inst.URL(), 1280, 900)
		shots := screenshotDir(dialect)

		b.visit("/")
		b.waitText("h1", "Companies", 5*time.Second)
		b.waitText("main", "No companies yet.", 5*time.Second)
		b.fill("#company-name", "Acme")
		b.submit("form[action='/companies'] button[type=submit]")
		cid := strings.TrimPrefix(b.path(), "/c/")
		if !store.ValidID(cid) {
			t.Fatalf("after creating a company: %s", b.path())
		}
		b.waitText("h1", "Acme", 5*time.Second)
		b.waitText(".flash", "Company created.", 5*time.Second)
		c := "/c/" + cid

		b.visit(c + "/agents/new")
		b.fill("#agent-name", "Helper")
		b.fill("#agent-command", "/bin/sh")
		b.fill("#agent-args", "-c\n"+agentScript)
		b.fill("#agent-timeout", "60")
		b.submit("main form button[type=submit]")
		b.waitText("h1", "Helper", 5*time.Second)
		b.waitText("main", "Active", 5*time.Second)
		b.waitText("main", "Standard", 5*time.Second)
		aid := b.path()[len(c+"/agents/"):]

		// Choosing Claude Code shows its settings and hides the process ones.
		b.visit(c + "/agents/new")
		eval[bool](b, `document.querySelector("#adapter-claude").click(), true`)
		b.eventually("the Claude Code settings", 5*time.Second, func() bool {
			return eval[bool](b, `!document.querySelector('[data-show-when="adapter=claude_local"]').hidden &&
				document.querySelector('[data-show-when="adapter=process"]').hidden &&
				document.querySelector('[data-show-when="adapter=codex_local"]').hidden`)
		})

		b.visit(c + "/tasks/new")
		b.fill("#task-title", "Write the weekly report")
		b.fill("#task-description", "Numbers first.\nThen the highlights.")
		b.fill("#task-assignee", aid)
		b.fill("#task-priority", "high")
		// The journey wakes the agent by a comment below: the task is
		// created without waking it (TestNewTaskWakesItsAssignee covers
		// the wake on assignment).
		b.click("#task-wake")
		b.submit("main form button[type=submit]")
		b.waitText("h1", "Write the weekly report", 5*time.Second)
		tid := b.path()[len(c+"/tasks/"):]

		// Comment and wake the agent (the box is ticked for an active agent).
		if !eval[bool](b, `document.querySelector("#comment-wake").checked`) {
			t.Fatal("Also wake is not ticked by default")
		}
		b.fill("#comment-body", "Please include the **numbers**.")
		b.submit("#comment-form button[type=submit]")
		b.waitText(".flash", "Comment added. Agent woken", 5*time.Second)
		b.waitText("#task-timeline", "Please include the numbers.", 5*time.Second)
		b.waitText("#task-timeline", "Local board", 5*time.Second)

		// From here on nothing reloads the page: the runs region updates live.
		eval[bool](b, `window.__pcNoReload = true`)
		b.eventually("the comment's run to succeed", 45*time.Second, func() bool {
			return b.exists(`#task-runs .run-row[data-status="succeeded"]`)
		})
		runs := api.List("/api/companies/" + cid + "/heartbeat-runs?issueId=" + tid)
		if len(runs) != 1 || runs[0]["wakeReason"] != "comment" || runs[0]["wakeCommentId"] == "" {
			t.Fatalf("runs after the comment: %v", runs)
		}
		// A wake from elsewhere (the API) appears and finishes in the open page.
		api.JSON("POST", "/api/agents/"+aid+"/wakeup", map[string]string{"reason": "manual", "issueId": tid}, 202)
		b.eventually("a second run row", 20*time.Second, func() bool {
			return eval[int](b, `document.querySelectorAll("#task-runs .run-row").length`) == 2
		})
		b.eventually("both runs to succeed", 45*time.Second, func() bool {
			return eval[int](b, `document.querySelectorAll('#task-runs .run-row[data-status="succeeded"]').length`) == 2
		})
		if !eval[bool](b, `window.__pcNoReload === true`) {
			t.Fatal("the task page reloaded")
		}
		b.screenshot(shots, "task-desktop")

		// The run log.
		b.submit(`#task-runs .run-row[data-status="succeeded"] a`)
		b.waitText("h1", "Run", 5*time.Second)
		b.waitText("pre.log", "hello from the agent for task "+tid, 5*time.Second)
		b.waitText("pre.log", "finished", 5*time.Second)
		b.waitText("main", "Succeeded", 5*time.Second)
		b.screenshot(shots, "run-desktop")

		// Members and board keys.
		b.visit(c + "/members")
		b.fill("#member-email", "ops@example.com")
		b.fill("#member-role", "admin")
		b.submit("form[action$='/members'] button[type=submit]")
		b.waitText(".flash", "Member saved.", 5*time.Second)
		b.waitText("#member-list", "ops@example.com", 5*time.Second)
		b.fill("#key-name", "CI deploy")
		b.submit("form[action$='/board-keys'] button[type=submit]")
		b.waitText("main", "Copy this key now. It won’t be shown again.", 5*time.Second)
		if tok := eval[string](b, `document.querySelector("#new-token").value`); !strings.HasPrefix(tok, "pcb_") {
			t.Fatalf("board key field: %q", tok)
		}

		// Instance settings.
		b.visit("/settings")
		b.click("#enable-isolated")
		b.submit("form[action='/settings'] button[type=submit]")
		b.waitText(".flash", "Settings saved.", 5*time.Second)
		if !eval[bool](b, `document.querySelector("#enable-isolated").checked`) {
			t.Fatal("the setting did not stick")
		}
		st := api.JSON("GET", "/api/instance/settings", nil, 200)
		if st["experimental"].(map[string]any)["enableIsolatedWorkspaces"] != true {
			t.Fatalf("settings: %v", st)
		}

		// Trust settings, reached from elsewhere with ?return=: the runtime
		// checklist shows with Low-trust review (isolated workspaces now
		// on, no sandbox yet), and saving goes back.
		b.visit(c + "/agents/" + aid + "/trust?return=" + url.QueryEscape(c+"/tasks?status=todo"))
		if !eval[bool](b, `document.querySelector("#runtime-checklist").hidden`) {
			t.Fatal("the runtime checklist shows for a standard agent")
		}
		b.click("#trust-low")
		b.click("#boundary-task")
		b.eventually("the runtime checklist", 5*time.Second, func() bool {
			return !eval[bool](b, `document.querySelector("#runtime-checklist").hidden`)
		})
		if got := b.text("#runtime-checklist .check-ok"); !strings.Contains(got, "Isolated workspaces are on") {
			t.Errorf("ticked line: %q", got)
		}
		if got := b.text("#runtime-checklist .check-no"); !strings.Contains(got, "Active sandbox environment selected") || !strings.Contains(got, "Edit agent") {
			t.Errorf("unticked line: %q", got)
		}
		b.fill("#boundary-task-id", tid)
		b.submit("main form button[type=submit]")
		if got := b.path(); got != c+"/tasks?status=todo" {
			t.Fatalf("after saving trust settings: %s", got)
		}
		b.waitText(".flash", "Trust settings saved.", 5*time.Second)
		// Back to standard, as the screenshots expect.
		api.JSON("PATCH", "/api/agents/"+aid, map[string]any{"permissions": map[string]any{"trustPreset": "standard", "authorizationPolicy": map[string]any{}}}, 200)

		if shots != "" {
			uiScreenshots(t, b, shots, c, tid, aid)
		}
		journeyPhonePages(t, b.base, shots, c, tid, aid)
	})
}

// uiScreenshots captures the main pages for docs/ui.md on a desktop when
// PAPERCLIP_UI_SCREENSHOTS names a directory (journeyPhonePages takes the
// phone ones).
func uiScreenshots(t *testing.T, b *browser, dir, c, tid, aid string) {
	api := testkit.NewClient(t, b.base)
	cid := strings.TrimPrefix(c, "/c/")
	for _, title := range []string{"Answer supplier questions about delivery dates", "Fix broken links on the pricing page", "Prepare the Q3 newsletter"} {
		api.JSON("POST", "/api/companies/"+cid+"/issues", map[string]any{"title": title, "assigneeAgentId": aid}, 201)
	}
	api.JSON("POST", "/api/companies/"+cid+"/issues", map[string]any{"title": "Reconcile November invoices", "status": "blocked"}, 201)
	pages := map[string]string{"home": "/", "overview": c, "tasks": c + "/tasks", "task": c + "/tasks/" + tid,
		"agents": c + "/agents", "agent": c + "/agents/" + aid, "projects": c + "/projects", "activity": c + "/activity", "members": c + "/members"}
	for name, p := range pages {
		b.visit(p)
		b.screenshot(dir, name+"-desktop")
	}
	trustPage(b, c, aid)
	b.screenshot(dir, "trust-desktop")
}

// journeyPhonePages opens the journey's main pages on a 390 px wide phone,
// so each passes the layout checks there (nothing wider than the screen,
// no select cutting off its choice), and captures them when dir is set.
func journeyPhonePages(t *testing.T, base, dir, c, tid, aid string) {
	phone := newBrowser(t, base, 390, 844)
	for name, p := range map[string]string{"overview": c, "tasks": c + "/tasks", "task": c + "/tasks/" + tid} {
		phone.visit(p)
		phone.screenshot(dir, name+"-phone")
	}
	trustPage(phone, c, aid)
	phone.screenshot(dir, "trust-phone")
}

// trustPage opens the agent's trust page with Low-trust review chosen, so
// its runtime checklist shows.
func trustPage(b *browser, c, aid string) {
	b.visit(c + "/agents/" + aid + "/trust")
	b.click("#trust-low")
	b.eventually("the runtime checklist", 5*time.Second, func() bool {
		return !eval[bool](b, `document.querySelector("#runtime-checklist").hidden`)
	})
}

// TestUIAuthenticatedSignInAndViewer signs in with a board key, signs out,
// and checks that a viewer sees no write forms.
func TestUIAuthenticatedSignInAndViewer(t *testing.T) {
	t.Parallel()
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, dbURL string) {
		t.Parallel()
		inst := startUIServer(t, dbURL, config.ModeAuthenticated)
		ctx := context.Background()
		st := inst.Store
		adminKey := adminBoardKey(t, inst)
		b := newBrowser(t, inst.URL(), 1280, 900)

		b.visit("/")
		if p := b.path(); p != "/login?next=%2F" {
			t.Fatalf("signed out: %s", p)
		}
		b.waitText("h1", "Sign in", 5*time.Second)
		b.fill("#login-key", "pcb_not_a_key")
		b.submit("main form button[type=submit]")
		b.waitText("[role=alert]", "That key isn’t valid. Check it and try again.", 5*time.Second)
		if v := eval[string](b, `document.querySelector("#login-key").value`); v != "" {
			t.Fatalf("the key field was re-rendered: %q", v)
		}
		b.fill("#login-key", "pcr_a_run_token")
		b.submit("main form button[type=submit]")
		b.waitText("[role=alert]", "Agent run tokens can’t sign in to the board.", 5*time.Second)
		b.fill("#login-key", adminKey)
		b.submit("main form button[type=submit]")
		b.waitText("h1", "Companies", 5*time.Second)
		b.waitText(".topbar", "admin@example.com", 5*time.Second)
		b.fill("#company-name", "Signed Co")
		b.submit("form[action='/companies'] button[type=submit]")
		b.waitText("h1", "Signed Co", 5*time.Second)
		c := b.path()
		cid := strings.TrimPrefix(c, "/c/")
		b.visit(c) // a reload keeps the session
		b.waitText("h1", "Signed Co", 5*time.Second)
		// A live region's poll (the Review badge's, every 400 ms here) that
		// reaches the server after the sign-out is answered 401 by design
		// (the page then says the session expired), and the browser logs
		// that failed fetch; the sign-out itself is what is checked below.
		b.tolerating(func() { b.submit(".topbar form[action='/logout'] button") })
		if p := b.path(); p != "/login" {
			t.Fatalf("after sign-out: %s", p)
		}
		b.waitText(".flash", "Signed out.", 5*time.Second)
		b.visit(c)
		if p := b.path(); !strings.HasPrefix(p, "/login?next=") {
			t.Fatalf("after sign-out the company page is at %s", p)
		}

		// A viewer: pages without write forms.
		viewer, err := st.EnsureUser(ctx, st.DB, "viewer@example.com", "", false)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.PutMembership(ctx, st.DB, cid, viewer.ID, "viewer", nil); err != nil {
			t.Fatal(err)
		}
		_, viewerKey, err := st.CreateBoardKey(ctx, st.DB, viewer.ID, cid, "viewer")
		if err != nil {
			t.Fatal(err)
		}
		adminAPI := testkit.NewClient(t, inst.URL()).As(adminKey, "")
		task := testkit.ID(adminAPI.JSON("POST", "/api/companies/"+cid+"/issues", map[string]string{"title": "Read only"}, 201))
		b.fill("#login-key", viewerKey)
		b.submit("main form button[type=submit]")
		for _, p := range []string{c, c + "/tasks", c + "/tasks/" + task, c + "/agents", c + "/projects", c + "/members"} {
			b.visit(p)
			forms := eval[[]string](b, `[...document.querySelectorAll("form[method=post]")].map(f => f.getAttribute("action"))`)
			for _, f := range forms {
				if f != "/logout" {
					t.Errorf("%s: viewer sees a form posting to %s", p, f)
				}
			}
		}
	})
}

// TestUICrossSitePostRefused: a page on another origin cannot make the
// signed-in browser create a company, by form or by fetch.
func TestUICrossSitePostRefused(t *testing.T) {
	t.Parallel()
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, dbURL string) {
		t.Parallel()
		inst := startUIServer(t, dbURL, config.ModeAuthenticated)
		key := adminBoardKey(t, inst)
		target := inst.URL()
		evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			switch r.URL.Path {
			case "/form":
				_, _ = w.Write([]byte(`<!doctype html><title>evil</title><form id="f" method="post" action="` + target +
					`/companies"><input name="name" value="pwned"><input name="csrf" value="guess"></form><script>document.getElementById("f").submit()</script>`))
			case "/fetch":
				_, _ = w.Write([]byte(`<!doctype html><title>evil</title><script>fetch("` + target +
					`/api/companies", {method: "POST", mode: "no-cors", credentials: "include", body: '{"name":"pwned"}'}).finally(() => { document.title = "done" })</script>`))
			}
		}))
		defer evil.Close()
		evilURL := strings.Replace(evil.URL, "127.0.0.1", "localhost", 1)

		b := newBrowser(t, inst.URL(), 1280, 900)
		b.visit("/login")
		b.fill("#login-key", key)
		b.submit("main form button[type=submit]")
		b.waitText("h1", "Companies", 5*time.Second)
		b.tolerating(func() {
			b.do("open the evil form page", navigateAction(evilURL+"/form"))
			b.eventually("the forged post to land", 10*time.Second, func() bool {
				return strings.HasPrefix(eval[string](b, `location.href`), target)
			})
			if body := b.text("body"); !strings.Contains(body, "cross-origin") && !strings.Contains(body, "expired") {
				t.Errorf("forged form post answered: %q", body)
			}
			b.do("open the evil fetch page", navigateAction(evilURL+"/fetch"))
			b.eventually("the forged fetch to settle", 10*time.Second, func() bool { return eval[string](b, `document.title`) == "done" })
		})
		api := testkit.NewClient(t, inst.URL()).As(key, "")
		for _, co := range api.List("/api/companies") {
			if co["name"] == "pwned" {
				t.Fatal("a cross-site request created a company")
			}
		}
	})
}

// TestUIScriptTitleIsText: a task titled <script> shows as text everywhere
// (no dialog opens: the browser guard fails the test on one).
func TestUIScriptTitleIsText(t *testing.T) {
	t.Parallel()
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, dbURL string) {
		t.Parallel()
		inst := startUIServer(t, dbURL, config.ModeLocalTrusted)
		api := testkit.NewClient(t, inst.URL())
		cid := testkit.ID(api.JSON("POST", "/api/companies", map[string]string{"name": "Esc"}, 201))
		b := newBrowser(t, inst.URL(), 1280, 900)
		const title = `<script>alert(1)</script><img src=x onerror=alert(2)>`
		b.visit("/c/" + cid + "/tasks/new")
		b.fill("#task-title", title)
		b.fill("#task-description", title)
		b.submit("main form button[type=submit]")
		if got := b.text("h1"); got != title {
			t.Fatalf("h1 = %q, want the literal title", got)
		}
		b.fill("#comment-body", title)
		b.submit("#comment-form button[type=submit]")
		b.waitText("#task-timeline", title, 5*time.Second)
		for _, p := range []string{"/c/" + cid + "/tasks", "/c/" + cid, "/c/" + cid + "/activity"} {
			b.visit(p)
			if n := eval[int](b, `document.querySelectorAll("main img, main script").length`); n != 0 {
				t.Errorf("%s: %d injected elements", p, n)
			}
		}
		b.visit("/c/" + cid + "/tasks")
		b.waitText("#task-list", title, 5*time.Second)
	})
}

// adminBoardKey creates an instance administrator and returns a board key
// of theirs, for signing a browser in.
func adminBoardKey(t *testing.T, inst *testkit.Instance) string {
	t.Helper()
	ctx := context.Background()
	st := inst.Store
	admin, err := st.EnsureUser(ctx, st.DB, "admin@example.com", "Admin", true)
	if err != nil {
		t.Fatal(err)
	}
	_, key, err := st.CreateBoardKey(ctx, st.DB, admin.ID, "", "browser")
	if err != nil {
		t.Fatal(err)
	}
	return key
}
