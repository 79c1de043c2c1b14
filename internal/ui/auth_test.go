package ui_test

import (
	"context"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/config"
	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

const (
	msgInvalid  = "That key isn’t valid. Check it and try again."
	msgRunToken = "Agent run tokens can’t sign in to the board."
	msgTooMany  = "Too many sign-in attempts. Wait a few minutes."
)

// startAuth starts an authenticated-mode server with an instance admin and
// a company; it returns the env, the admin's key and the company id.
func startAuth(t *testing.T, dbURL string) (*env, string, string) {
	e := start(t, dbURL, config.ModeAuthenticated)
	admin, _ := e.boardUser("admin@example.com", "", "", true)
	e.api = e.api.As(admin, "")
	cid := testkit.ID(e.api.JSON("POST", "/api/companies", map[string]string{"name": "Auth Co"}, 201))
	return e, admin, cid
}

func TestSessions(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, dbURL string) {
		e, admin, cid := startAuth(t, dbURL)
		ctx := context.Background()

		// Signed out: pages redirect to sign-in with a next path.
		p := e.get("/c/" + cid + "/tasks?status=todo")
		if p.status != http.StatusSeeOther || p.header.Get("Location") != "/login?next=%2Fc%2F"+cid+"%2Ftasks%3Fstatus%3Dtodo" {
			t.Fatalf("signed-out page: %d %s", p.status, p.header.Get("Location"))
		}
		if p := e.get("/c/" + cid + "?fragment=overview"); p.status != http.StatusUnauthorized {
			t.Errorf("signed-out fragment: %d", p.status)
		}
		lp := e.get("/login")
		if lp.status != 200 || !strings.Contains(lp.body, `id="login-key"`) || !strings.Contains(lp.body, `type="password"`) {
			t.Fatalf("login page: %d", lp.status)
		}
		checkPage(t, "/login", lp)

		// Failures never say which part was wrong, and never echo the key.
		for key, want := range map[string]string{"pcb_wrong": msgInvalid, "": msgInvalid, "garbage": msgInvalid, "pcr_runtoken": msgRunToken} {
			p := e.login(key)
			if p.status != http.StatusUnauthorized || !strings.Contains(p.body, want) {
				t.Errorf("login %q: %d, want %q", key, p.status, want)
			}
			if key != "" && strings.Contains(p.body, key) {
				t.Errorf("login page re-renders the key %q", key)
			}
		}
		// Without the sign-in form token: refused.
		if p := e.do("POST", "/login", url.Values{"key": {admin}}, nil); p.status != http.StatusForbidden {
			t.Errorf("login without token: %d", p.status)
		}

		// Success: session cookie, redirect to a safe next only.
		form := url.Values{"key": {admin}, "next": {"//evil.example/x"}}
		p = e.post("/login", "/login", form)
		if p.status != http.StatusSeeOther || p.header.Get("Location") != "/" {
			t.Fatalf("login: %d %s", p.status, p.header.Get("Location"))
		}
		ck := p.header.Get("Set-Cookie")
		if !strings.Contains(ck, "paperclip_session=pcs_") || !strings.Contains(ck, "HttpOnly") || !strings.Contains(ck, "SameSite=Lax") {
			t.Fatalf("session cookie: %s", ck)
		}
		if strings.Contains(e.inst.Logs.String(), admin) {
			t.Fatal("the board key appears in the logs")
		}
		home := e.get("/")
		if home.status != 200 || !strings.Contains(home.body, "admin@example.com") || !strings.Contains(home.body, "Auth Co") {
			t.Fatalf("home after login: %d", home.status)
		}
		if p := e.get("/login"); p.status != http.StatusSeeOther {
			t.Errorf("login page while signed in: %d", p.status)
		}
		// Next paths: only UI paths are followed.
		for next, want := range map[string]string{"/c/" + cid: "/c/" + cid, "https://evil.example": "/", "/\\evil": "/", "/api/companies": "/"} {
			// A fresh browser (its own cookies: the sign-in token is bound to them).
			jar, _ := cookiejar.New(nil)
			e2 := &env{t: t, inst: e.inst, base: e.base, http: &http.Client{Jar: jar, CheckRedirect: e.http.CheckRedirect}}
			p := e2.post("/login", "/login", url.Values{"key": {admin}, "next": {next}})
			if p.header.Get("Location") != want {
				t.Errorf("next %q: Location %q, want %q", next, p.header.Get("Location"), want)
			}
		}

		// Idle and absolute expiry, and revoked keys, end the session.
		st := e.inst.Store
		expire := func(query string, args ...any) {
			t.Helper()
			if _, err := st.DB.ExecContext(ctx, query, args...); err != nil {
				t.Fatal(err)
			}
		}
		check := func(what string, ok bool) {
			t.Helper()
			p := e.get("/")
			if (p.status == 200) != ok {
				t.Errorf("%s: status %d, want signed in = %v", what, p.status, ok)
			}
		}
		check("fresh session", true)
		expire(`UPDATE ui_sessions SET last_seen_at = $1`, time.Now().Add(-13*time.Hour).UTC())
		check("idle 13 h", false)
		expire(`UPDATE ui_sessions SET last_seen_at = $1`, time.Now().UTC())
		check("seen again", true)
		expire(`UPDATE ui_sessions SET expires_at = $1`, time.Now().Add(-time.Minute).UTC())
		check("past absolute expiry", false)
		expire(`UPDATE ui_sessions SET expires_at = $1`, time.Now().Add(time.Hour).UTC())
		check("restored", true)
		expire(`UPDATE board_api_keys SET revoked_at = $1`, time.Now().UTC())
		check("key revoked", false)
		expire(`UPDATE board_api_keys SET revoked_at = NULL`)
		check("key restored", true)

		// Sign-out revokes the session row and clears the cookie.
		p = e.post("/", "/logout", nil)
		if p.status != http.StatusSeeOther || p.header.Get("Location") != "/login" {
			t.Fatalf("logout: %d %s", p.status, p.header.Get("Location"))
		}
		if p := e.get("/c/" + cid); p.status != http.StatusSeeOther {
			t.Errorf("after logout: %d", p.status)
		}
		if p := e.get("/login"); !strings.Contains(p.body, "Signed out.") {
			t.Errorf("no sign-out flash")
		}
		var revoked int
		if err := st.DB.QueryRowContext(ctx, `SELECT COUNT(*) FROM ui_sessions WHERE revoked_at IS NOT NULL`).Scan(&revoked); err != nil || revoked != 1 {
			t.Errorf("revoked sessions: %d %v", revoked, err)
		}
	})
}

// TestLoginRateLimit (issue 28 item 7): ten bad sign-ins from one address
// slow that address's failures only; a valid key from the same address
// (behind the documented proxy: every user) still signs in.
func TestLoginRateLimit(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, dbURL string) {
		e, admin, _ := startAuth(t, dbURL)
		for i := 0; i < 10; i++ {
			if p := e.login("pcb_wrong"); p.status != http.StatusUnauthorized {
				t.Fatalf("attempt %d: %d", i, p.status)
			}
		}
		if p := e.login("pcb_wrong"); p.status != http.StatusTooManyRequests || !strings.Contains(p.body, msgTooMany) {
			t.Fatalf("after 10 failures: %d", p.status)
		}
		// The right key signs in all the same.
		if p := e.login(admin); p.status != http.StatusSeeOther {
			t.Fatalf("valid key after 10 failures: %d %s", p.status, p.body)
		}
	})
}

var postFormRe = regexp.MustCompile(`<form[^>]*method="post"[^>]*action="([^"]+)"`)

func TestViewerSeesNoWriteForms(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, dbURL string) {
		e, _, cid := startAuth(t, dbURL)
		agent := testkit.ID(e.api.JSON("POST", "/api/companies/"+cid+"/agents", map[string]any{"name": "Bot",
			"adapterType": "process", "adapterConfig": map[string]any{"command": "/bin/true"}}, 201))
		task := testkit.ID(e.api.JSON("POST", "/api/companies/"+cid+"/issues", map[string]any{"title": "T", "assigneeAgentId": agent}, 201))
		viewer, _ := e.boardUser("viewer@example.com", cid, "viewer", false)
		if p := e.login(viewer); p.status != http.StatusSeeOther {
			t.Fatalf("viewer login: %d %s", p.status, p.body)
		}
		c := "/c/" + cid
		for _, path := range []string{"/", c, c + "/tasks", c + "/tasks/" + task, c + "/agents", c + "/agents/" + agent,
			c + "/projects", c + "/activity", c + "/members"} {
			p := e.get(path)
			checkPage(t, path, p)
			for _, m := range postFormRe.FindAllStringSubmatch(p.body, -1) {
				// Creating a company of one's own is open to every board user.
				if m[1] != "/logout" && (path != "/" || m[1] != "/companies") {
					t.Errorf("%s: viewer sees a form posting to %s", path, m[1])
				}
			}
			if strings.Contains(p.body, "Instance settings") {
				t.Errorf("%s: viewer sees instance settings", path)
			}
		}
		// Every refusal names what was refused.
		for path, action := range map[string]string{c + "/tasks/new": "create tasks", c + "/agents/new": "create agents",
			c + "/agents/" + agent + "/edit": "change this agent", c + "/agents/" + agent + "/trust": "change this agent’s trust settings",
			"/settings": "see instance settings"} {
			p := e.get(path)
			if p.status != http.StatusForbidden || !strings.Contains(p.body, "You don’t have permission to "+action+".") {
				t.Errorf("%s: viewer gets %d, want 403 naming %q: %s", path, p.status, action, p.body)
			}
		}
		// A forged POST with a valid token is refused by the API, and the
		// page gives the API's reason under the action.
		p := e.post(c, c+"/tasks/"+task+"/comments", url.Values{"body": {"sneaky"}})
		if p.status != http.StatusForbidden || !strings.Contains(p.body, "You don’t have permission to comment on this task.") ||
			!strings.Contains(p.body, "Reason: viewers have read-only access") {
			t.Errorf("viewer comment: %d %s", p.status, p.body)
		}
		for path, action := range map[string]string{c + "/tasks": "create tasks", c + "/tasks/" + task: "change this task",
			c + "/agents/" + agent + "/wake": "wake this agent", c + "/projects": "create projects"} {
			p := e.post(c, path, url.Values{"title": {"sneaky"}, "name": {"sneaky"}, "status": {"done"}})
			if p.status != http.StatusForbidden || !strings.Contains(p.body, "You don’t have permission to "+action+".") {
				t.Errorf("viewer POST %s: %d, want 403 naming %q: %s", path, p.status, action, p.body)
			}
		}
		if n := len(e.api.List("/api/issues/" + task + "/comments")); n != 0 {
			t.Errorf("viewer comment saved: %d", n)
		}

		// A member's refused form is shown again with the input, naming
		// the action and the API's reason.
		member, _ := e.boardUser("member@example.com", cid, "member", false)
		e.http.Jar, _ = cookiejar.New(nil)
		if p := e.login(member); p.status != http.StatusSeeOther {
			t.Fatalf("member login: %d", p.status)
		}
		p = e.post(c+"/projects", c+"/projects", url.Values{"name": {"Site"}, "strategy": {"local_path"}, "path": {"/srv/site"}})
		if p.status != http.StatusForbidden || !strings.Contains(p.body, "You don’t have permission to create projects.") ||
			!strings.Contains(p.body, "Reason: only an instance administrator may give a project a workspace path") ||
			!strings.Contains(p.body, `value="/srv/site"`) {
			t.Errorf("member's workspace project: %d %s", p.status, p.body)
		}
	})
}

func TestCSRF(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, dbURL string) {
		e := startLocal(t, dbURL)
		count := func() int { return len(e.api.List("/api/companies")) }
		// No token.
		if p := e.do("POST", "/companies", url.Values{"name": {"pwned"}}, nil); p.status != http.StatusForbidden ||
			!strings.Contains(p.body, "This form has expired.") {
			t.Errorf("no token: %d", p.status)
		}
		// A wrong token.
		if p := e.do("POST", "/companies", url.Values{"name": {"pwned"}, "csrf": {"AAAA"}}, nil); p.status != http.StatusForbidden {
			t.Errorf("wrong token: %d", p.status)
		}
		// A valid token from a cross-site request.
		tok := e.csrf("/")
		for _, h := range []map[string]string{{"Sec-Fetch-Site": "cross-site"}, {"Origin": "http://evil.example"}} {
			p := e.do("POST", "/companies", url.Values{"name": {"pwned"}, "csrf": {tok}}, h)
			if p.status != http.StatusForbidden {
				t.Errorf("cross-site %v: %d", h, p.status)
			}
		}
		if n := count(); n != 0 {
			t.Fatalf("%d companies created by forged posts", n)
		}
		// The same request from the page itself works.
		p := e.do("POST", "/companies", url.Values{"name": {"ok"}, "csrf": {tok}}, map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": e.base})
		if p.status != http.StatusSeeOther {
			t.Fatalf("same-origin post: %d %s", p.status, p.body)
		}
		// The JSON API refuses the same forgery (a page posting JSON-looking
		// text/plain or a real JSON body from another origin).
		for _, ct := range []string{"application/json", "text/plain"} {
			req, _ := http.NewRequest("POST", e.base+"/api/companies", strings.NewReader(`{"name":"pwned"}`))
			req.Header.Set("Content-Type", ct)
			req.Header.Set("Origin", "http://evil.example")
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != http.StatusForbidden && res.StatusCode != http.StatusUnsupportedMediaType {
				t.Errorf("cross-origin API post (%s): %d", ct, res.StatusCode)
			}
		}
		// DNS rebinding: a foreign Host name is refused before any page.
		req, _ := http.NewRequest("GET", e.base+"/", nil)
		req.Host = "evil.example:3100"
		if res, err := http.DefaultClient.Do(req); err != nil || res.StatusCode != http.StatusForbidden {
			t.Errorf("foreign Host: %v %v", res.StatusCode, err)
		} else {
			res.Body.Close()
		}
		// CLI-style API calls (no Origin, no Sec-Fetch-Site) are unchanged.
		e.api.JSON("POST", "/api/companies", map[string]string{"name": "cli"}, 201)
		if n := count(); n != 2 {
			t.Errorf("companies: %d", n)
		}
	})
}
