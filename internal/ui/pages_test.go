package ui_test

import (
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
	inlineScript = regexp.MustCompile(`<script(?:\s[^>]*)?>\s*[^<\s]`)
	eventAttr    = regexp.MustCompile(`(?i)<[^>]+\son[a-z]+\s*=`)
	h1Re         = regexp.MustCompile(`<h1[\s>]`)
	remoteLoad   = regexp.MustCompile(`(?i)(\ssrc\s*=\s*"?(https?:)?//|<link[^>]*\shref\s*=\s*"?(https?:)?//|\saction\s*=\s*"?(https?:)?//)`)
)

var wantHeaders = map[string]string{
	"Content-Security-Policy":      "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'",
	"X-Frame-Options":              "DENY",
	"Referrer-Policy":              "no-referrer",
	"X-Content-Type-Options":       "nosniff",
	"Cross-Origin-Opener-Policy":   "same-origin",
	"Cross-Origin-Resource-Policy": "same-origin",
	"Cache-Control":                "no-store",
}

// checkPage asserts the rules every rendered page keeps (security headers,
// no inline script or style, one h1, a language).
func checkPage(t *testing.T, path string, p page) {
	t.Helper()
	if p.status != http.StatusOK {
		t.Fatalf("GET %s: status %d: %s", path, p.status, p.body)
	}
	for k, v := range wantHeaders {
		if !strings.Contains(p.header.Get(k), v) {
			t.Errorf("GET %s: header %s = %q, want %q", path, k, p.header.Get(k), v)
		}
	}
	if !strings.Contains(p.header.Get("Content-Security-Policy"), "frame-ancestors 'none'") {
		t.Errorf("GET %s: CSP lacks frame-ancestors", path)
	}
	if strings.Contains(p.body, "style=") || strings.Contains(p.body, "<style") {
		t.Errorf("GET %s: inline style", path)
	}
	if inlineScript.MatchString(p.body) {
		t.Errorf("GET %s: inline script", path)
	}
	if m := eventAttr.FindString(p.body); m != "" {
		t.Errorf("GET %s: event handler attribute %q", path, m)
	}
	if n := len(h1Re.FindAllString(p.body, -1)); n != 1 {
		t.Errorf("GET %s: %d <h1> elements, want 1", path, n)
	}
	if !strings.Contains(p.body, `<html lang="en">`) {
		t.Errorf("GET %s: no lang", path)
	}
	// Links may point elsewhere (AgentMail's console and docs open in a
	// new tab); what loads with the page may not.
	if m := remoteLoad.FindString(p.body); m != "" {
		t.Errorf("GET %s: page loads a remote resource: %s", path, m)
	}
}

func TestEveryPage(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, dbURL string) {
		e := startLocal(t, dbURL)
		f := e.seed("Acme")
		c := "/c/" + f.company
		testkit.Eventually(t, 20e9, "run finished", func() bool {
			return e.api.JSON("GET", "/api/heartbeat-runs/"+f.run, nil, 200)["status"] == "succeeded"
		})
		e.api.JSON("POST", "/api/companies/"+f.company+"/projects", map[string]string{"name": "Site"}, 201)
		paths := []string{"/", "/settings", c, c + "/tasks", c + "/tasks?status=todo&origin=email", c + "/tasks/new",
			c + "/tasks/" + f.task, c + "/runs/" + f.run, c + "/agents", c + "/agents/new", c + "/agents/" + f.agent,
			c + "/agents/" + f.agent + "/edit", c + "/agents/" + f.agent + "/trust", c + "/projects", c + "/activity",
			c + "/activity?email=1", c + "/members"}
		for _, p := range paths {
			checkPage(t, p, e.get(p))
		}
		if p := e.get(c + "/runs/" + f.run); !strings.Contains(p.body, "hello") {
			t.Errorf("run page lacks the log: %s", p.body)
		}
		// Static assets: hashed names only, cached forever.
		css := regexp.MustCompile(`/static/app\.[0-9a-f]{10}\.css`).FindString(e.get("/").body)
		if p := e.get(css); p.status != 200 || !strings.Contains(p.header.Get("Cache-Control"), "immutable") {
			t.Errorf("GET %s: %d %v", css, p.status, p.header)
		}
		if p := e.get("/static/app.css"); p.status != 404 {
			t.Errorf("unhashed asset: status %d", p.status)
		}
		// Unknown UI paths are an HTML 404; unknown API paths stay JSON.
		if p := e.get("/nope"); p.status != 404 || !strings.Contains(p.body, "Not found") {
			t.Errorf("unknown path: %d", p.status)
		}
		if p := e.get("/api/nope"); p.status != 404 || !strings.Contains(p.header.Get("Content-Type"), "json") {
			t.Errorf("unknown api path: %d %s", p.status, p.header.Get("Content-Type"))
		}
	})
}

func TestCrossCompanyIDsAreNotFound(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, dbURL string) {
		e := startLocal(t, dbURL)
		a, b := e.seed("A"), e.seed("B")
		ca := "/c/" + a.company
		for _, p := range []string{ca + "/tasks/" + b.task, ca + "/agents/" + b.agent, ca + "/runs/" + b.run,
			ca + "/agents/" + b.agent + "/edit", ca + "/tasks/not-a-uuid", "/c/not-a-uuid", "/c/" + testkit.NewUUID()} {
			if got := e.get(p); got.status != http.StatusNotFound {
				t.Errorf("GET %s: status %d, want 404", p, got.status)
			}
		}
		// Writes through another company's URL are refused the same way.
		got := e.post(ca+"/tasks/new", ca+"/tasks/"+b.task+"/comments", url.Values{"body": {"x"}})
		if got.status != http.StatusNotFound {
			t.Errorf("cross-company comment: status %d", got.status)
		}
	})
}

func TestEscaping(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, dbURL string) {
		e := startLocal(t, dbURL)
		f := e.seed("Esc")
		evil := []string{`<script>alert(1)</script>`, `"><img src=x onerror=alert(2)>`, `![t](http://127.0.0.1:1/p.png)`}
		title := strings.Join(evil, " ")
		tid := testkit.ID(e.api.JSON("POST", "/api/companies/"+f.company+"/issues",
			map[string]string{"title": title, "description": title}, 201))
		c := "/c/" + f.company
		p := e.post(c+"/tasks/"+tid, c+"/tasks/"+tid+"/comments", url.Values{"body": {title + ` \!\[tracker\](http://x/p.png) **bold**`}})
		if p.status != http.StatusSeeOther {
			t.Fatalf("comment: %d %s", p.status, p.body)
		}
		for _, path := range []string{c + "/tasks/" + tid, c + "/tasks", c, c + "/activity"} {
			body := e.get(path).body
			for _, bad := range []string{"<script>alert", "<img"} {
				if strings.Contains(body, bad) {
					t.Errorf("%s renders %q unescaped", path, bad)
				}
			}
		}
		body := e.get(c + "/tasks/" + tid).body
		for _, want := range []string{"&lt;script&gt;alert(1)&lt;/script&gt;", "&#34;&gt;&lt;img src=x onerror=alert(2)&gt;",
			"![tracker](http://x/p.png)", "<strong>bold</strong>"} {
			if !strings.Contains(body, want) {
				t.Errorf("task page lacks %q", want)
			}
		}
	})
}

func TestFragments(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, dbURL string) {
		e := startLocal(t, dbURL)
		f := e.seed("Frag")
		// Settle first: a running run makes the region poll faster, which
		// changes the fragment (its data-poll-ms) and so its ETag.
		testkit.Eventually(t, 20e9, "run finished", func() bool {
			return e.api.JSON("GET", "/api/heartbeat-runs/"+f.run, nil, 200)["status"] == "succeeded"
		})
		path := "/c/" + f.company + "/tasks/" + f.task + "?fragment=task-timeline"
		p := e.get(path)
		if p.status != 200 || !strings.HasPrefix(strings.TrimSpace(p.body), `<div id="task-timeline"`) ||
			strings.Contains(p.body, "<html") || !strings.Contains(p.body, "first comment") {
			t.Fatalf("fragment: %d %q", p.status, p.body)
		}
		etag := p.header.Get("ETag")
		if etag == "" || p.header.Get("Cache-Control") != "no-store" || p.header.Get("Content-Type") != "text/html; charset=utf-8" {
			t.Fatalf("fragment headers: %v", p.header)
		}
		if p := e.do("GET", path, nil, map[string]string{"If-None-Match": etag}); p.status != http.StatusNotModified || p.body != "" {
			t.Errorf("If-None-Match: %d %q", p.status, p.body)
		}
		e.api.JSON("POST", "/api/issues/"+f.task+"/comments", map[string]string{"body": "second"}, 201)
		if p := e.do("GET", path, nil, map[string]string{"If-None-Match": etag}); p.status != 200 || !strings.Contains(p.body, "second") {
			t.Errorf("changed fragment: %d", p.status)
		}
		for _, frag := range []string{"task-runs", "task-header"} {
			if p := e.get("/c/" + f.company + "/tasks/" + f.task + "?fragment=" + frag); p.status != 200 || !strings.Contains(p.body, `id="`+frag+`"`) {
				t.Errorf("fragment %s: %d %s", frag, p.status, p.body)
			}
		}
		for _, p := range []string{"/c/" + f.company + "?fragment=overview", "/c/" + f.company + "/tasks?fragment=task-list"} {
			if got := e.get(p); got.status != 200 {
				t.Errorf("%s: %d", p, got.status)
			}
		}
		if p := e.get("/c/" + f.company + "/tasks/" + f.task + "?fragment=nope"); p.status != http.StatusNotFound {
			t.Errorf("unknown fragment: %d", p.status)
		}
	})
}
