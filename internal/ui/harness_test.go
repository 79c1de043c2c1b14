package ui_test

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/paperclipai/paperclipai/internal/config"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/store"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// env is a running server and a browser-like client (cookies, no redirect
// following) for handler tests.
type env struct {
	t    *testing.T
	inst *testkit.Instance
	base string
	api  *testkit.Client
	http *http.Client
}

func start(t *testing.T, dbURL, mode string) *env {
	t.Helper()
	cfg := testkit.Config(t, dbURL)
	cfg.DeploymentMode = mode
	return startConfig(t, cfg)
}

// startConfig starts a server with cfg and a browser-like client.
func startConfig(t *testing.T, cfg config.Config) *env {
	t.Helper()
	inst := testkit.Start(t, cfg)
	jar, _ := cookiejar.New(nil)
	e := &env{t: t, inst: inst, base: inst.URL(), api: testkit.NewClient(t, inst.URL()),
		http: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	return e
}

func startLocal(t *testing.T, dbURL string) *env { return start(t, dbURL, config.ModeLocalTrusted) }

type page struct {
	status int
	header http.Header
	body   string
}

func (e *env) do(method, path string, form url.Values, hdr map[string]string) page {
	e.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, e.base+path, body)
	if err != nil {
		e.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := e.http.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return page{status: res.StatusCode, header: res.Header, body: string(b)}
}

func (e *env) get(path string) page { e.t.Helper(); return e.do("GET", path, nil, nil) }

// post submits a form with the page's form token (taken from a GET of from).
func (e *env) post(from, path string, form url.Values) page {
	e.t.Helper()
	if form == nil {
		form = url.Values{}
	}
	if form.Get("csrf") == "" {
		form.Set("csrf", e.csrf(from))
	}
	return e.do("POST", path, form, nil)
}

var csrfRe = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func (e *env) csrf(from string) string {
	e.t.Helper()
	p := e.get(from)
	m := csrfRe.FindStringSubmatch(p.body)
	if m == nil {
		e.t.Fatalf("no form token on %s (%d): %s", from, p.status, p.body)
	}
	return m[1]
}

// fixture is one company with an agent, a task with a comment and a run.
type fixture struct {
	company, agent, task, run string
}

func (e *env) seed(name string) fixture {
	e.t.Helper()
	var f fixture
	f.company = testkit.ID(e.api.JSON("POST", "/api/companies", map[string]string{"name": name}, 201))
	f.agent = testkit.ID(e.api.JSON("POST", "/api/companies/"+f.company+"/agents", map[string]any{"name": name + " bot",
		"adapterType": "process", "adapterConfig": map[string]any{"command": "/bin/echo", "args": []string{"hello"}}}, 201))
	f.task = testkit.ID(e.api.JSON("POST", "/api/companies/"+f.company+"/issues", map[string]any{"title": name + " task",
		"assigneeAgentId": f.agent}, 201))
	e.api.JSON("POST", "/api/issues/"+f.task+"/comments", map[string]string{"body": "first comment"}, 201)
	f.run = testkit.ID(e.api.JSON("POST", "/api/agents/"+f.agent+"/wakeup", map[string]string{"reason": "manual", "issueId": f.task}, 202))
	return f
}

// boardUser creates a user with a membership role in company and returns
// a board key for it.
func (e *env) boardUser(email, company, role string, admin bool) (string, domain.BoardAPIKey) {
	e.t.Helper()
	ctx := context.Background()
	st := e.inst.Store
	u, err := st.EnsureUser(ctx, st.DB, email, "", admin)
	if err != nil {
		e.t.Fatal(err)
	}
	if company != "" {
		if _, err := st.PutMembership(ctx, st.DB, company, u.ID, role, nil); err != nil {
			e.t.Fatal(err)
		}
	}
	k, token, err := st.CreateBoardKey(ctx, st.DB, u.ID, "", "test")
	if err != nil {
		e.t.Fatal(err)
	}
	return token, k
}

// login signs the client in with a board key.
func (e *env) login(key string) page {
	e.t.Helper()
	return e.post("/login", "/login", url.Values{"key": {key}})
}

var _ = store.HashToken
