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

	"github.com/paperclipai/paperclipai/internal/agentmail"
	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/emulator"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// sentinel is the organization key of the email handler tests: it must
// never appear in any answer, redirect or log line.
const sentinel = "am_SECRET_SENTINEL_7f3a"

// emailEnv is a UI server wired to an AgentMail emulator whose default
// organization has the sentinel key, with one company and one agent.
type emailEnv struct {
	*env
	em      *emulator.Server
	company string
	agent   string
	// seen collects every UI answer (bodies, headers, redirects).
	seen strings.Builder
}

func startEmail(t *testing.T, dbURL string) *emailEnv {
	t.Helper()
	em, err := emulator.Start(context.Background(), emulator.Options{APIKeys: []string{sentinel}, DeliveryDelay: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { em.Close() })
	cfg := testkit.EmailConfig(testkit.Config(t, dbURL), em)
	cfg.AgentMailTimeout = 3 * time.Second
	inst := testkit.Start(t, cfg)
	jar, _ := cookiejar.New(nil)
	e := &emailEnv{env: &env{t: t, inst: inst, base: inst.URL(), api: testkit.NewClient(t, inst.URL()),
		http: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}, em: em}
	e.company = testkit.ID(e.api.JSON("POST", "/api/companies", map[string]string{"name": "Mail Co"}, 201))
	e.agent = testkit.ID(e.api.JSON("POST", "/api/companies/"+e.company+"/agents", map[string]any{"name": "Mail Assistant",
		"adapterType": "process", "adapterConfig": map[string]any{"command": "/bin/true"}}, 201))
	return e
}

func (e *emailEnv) enable() {
	e.api.JSON("PATCH", "/api/instance/settings", map[string]any{"experimental": map[string]any{"enableChatConnectors": true}}, 200)
}

func (e *emailEnv) c() string { return "/c/" + e.company }

func (e *emailEnv) am() string { return "/c/" + e.company + "/apps/agentmail" }

// record keeps an answer for the secret check.
func (e *emailEnv) record(p page) page {
	e.seen.WriteString(p.body)
	for k, v := range p.header {
		e.seen.WriteString(k + ": " + strings.Join(v, ",") + "\n")
	}
	return p
}

func (e *emailEnv) get(path string) page { e.t.Helper(); return e.record(e.env.get(path)) }

func (e *emailEnv) post(from, path string, form url.Values) page {
	e.t.Helper()
	return e.record(e.env.post(from, path, form))
}

// location is a 303's target.
func location(t *testing.T, p page) string {
	t.Helper()
	if p.status != http.StatusSeeOther {
		t.Fatalf("want 303, got %d: %s", p.status, p.body)
	}
	return p.header.Get("Location")
}

var ridRe = regexp.MustCompile(`/setup/([0-9a-f-]{36})`)

func ridOf(t *testing.T, loc string) string {
	t.Helper()
	m := ridRe.FindStringSubmatch(loc)
	if m == nil {
		t.Fatalf("no request id in %s", loc)
	}
	return m[1]
}

var idemRe = regexp.MustCompile(`name="idempotencyKey" value="([^"]+)"`)

// connect saves a credential through E3 and returns its id.
func (e *emailEnv) connect(key string) string {
	e.t.Helper()
	keyPage := e.am() + "/connect/key?grant=organization&agents=specific&agent=" + e.agent
	p := e.get(keyPage)
	m := idemRe.FindStringSubmatch(p.body)
	if m == nil {
		e.t.Fatalf("no idempotency key on the key step: %s", p.body)
	}
	loc := location(e.t, e.post(keyPage, e.am()+"/connect", url.Values{"apiKey": {key}, "grant": {"organization"}, "agents": {"specific"},
		"agent": {e.agent}, "idempotencyKey": {m[1]}}))
	id := regexp.MustCompile(`/connections/([0-9a-f-]{36})/connected$`).FindStringSubmatch(loc)
	if id == nil {
		e.t.Fatalf("connect redirected to %s", loc)
	}
	return id[1]
}

// wizard runs the wizard from the entry to the review step and returns
// the request id and the review URL.
func (e *emailEnv) wizardToReview(conn, username string) (string, string) {
	e.t.Helper()
	loc := location(e.t, e.get(e.am()+"/setup?connection="+conn))
	rid := ridOf(e.t, loc)
	loc = location(e.t, e.post(loc, e.am()+"/setup/"+rid+"/agent?"+strings.SplitN(loc, "?", 2)[1],
		url.Values{"agent": {e.agent}, "connection": {conn}}))
	if !strings.Contains(loc, "step=address") {
		e.t.Fatalf("after step 1: %s", loc)
	}
	loc = location(e.t, e.post(loc, e.am()+"/setup/"+rid+"/address?"+strings.SplitN(loc, "?", 2)[1],
		url.Values{"mode": {"new"}, "username": {username}, "domain": {"agentmail.to"}, "receive": {"websocket"}}))
	if !strings.Contains(loc, "step=review") {
		e.t.Fatalf("after step 2: %s", loc)
	}
	return rid, loc
}

// create posts the review step's form.
func (e *emailEnv) create(review, rid string) page {
	e.t.Helper()
	return e.post(review, e.am()+"/setup/"+rid+"/create?"+strings.SplitN(review, "?", 2)[1], url.Values{})
}

// The email pages in order: disabled state, connect with the sentinel key,
// permissions, the wizard to the ready screen and the inbox pages. Every
// page keeps the page rules; the key appears in no answer and no log line.
func TestEmailPagesAndSecretHygiene(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, dbURL string) {
		e := startEmail(t, dbURL)
		c := e.c()
		p := e.get(c + "/apps")
		checkPage(t, c+"/apps", p)
		if !strings.Contains(p.body, "Email connections are experimental and turned off.") || !strings.Contains(p.body, `id="enable-email"`) {
			t.Fatalf("disabled state: %s", p.body)
		}
		if p := e.get(e.am()); p.status != http.StatusForbidden || !strings.Contains(p.body, "Turn on email connections") {
			t.Fatalf("AgentMail page while email is off: %d", p.status)
		}
		if loc := location(t, e.post(c+"/apps", c+"/apps/enable-email", nil)); loc != c+"/apps" {
			t.Fatalf("enable: %s", loc)
		}
		if p := e.get(c + "/apps"); !strings.Contains(p.body, "Connect AgentMail") || !strings.Contains(p.body, "Not connected") {
			t.Fatalf("apps after enabling: %s", p.body)
		}

		// E3: empty key, bad key (diagnostics, empty field), good key.
		keyPage := e.am() + "/connect/key?grant=organization&agents=specific&agent=" + e.agent
		checkPage(t, e.am()+"/connect", e.get(e.am()+"/connect"))
		checkPage(t, keyPage, e.get(keyPage))
		p = e.post(keyPage, e.am()+"/connect", url.Values{"apiKey": {""}, "idempotencyKey": {testkit.NewUUID()}})
		if p.status != 400 || !strings.Contains(p.body, "Enter an API key to continue.") {
			t.Fatalf("empty key: %d %s", p.status, p.body)
		}
		p = e.post(keyPage, e.am()+"/connect", url.Values{"apiKey": {"am_not_a_real_key"}, "idempotencyKey": {testkit.NewUUID()}})
		if p.status != 422 || !strings.Contains(p.body, "AgentMail rejected the API key.") ||
			!strings.Contains(p.body, "Operation: inspect_key · AgentMail status: 403 · Code: unknown") {
			t.Fatalf("bad key: %d %s", p.status, p.body)
		}
		if strings.Contains(p.body, "am_not_a_real_key") || regexp.MustCompile(`id="api-key"[^>]*value=`).MatchString(p.body) {
			t.Fatal("the key field was re-rendered with the key")
		}
		if got := e.api.List("/api/companies/" + e.company + "/email/connections"); len(got) != 0 {
			t.Fatalf("a refused key saved a connection: %v", got)
		}
		conn := e.connect(sentinel)
		p = e.get(e.am() + "/connections/" + conn + "/connected")
		checkPage(t, "connected", p)
		for _, want := range []string{"AgentMail is connected", "Any human in the organization", "Mail Assistant", "Organization key", "None assigned yet"} {
			if !strings.Contains(p.body, want) {
				t.Errorf("connected page lacks %q", want)
			}
		}
		checkPage(t, "permissions", e.get(e.am()+"/connections/"+conn))

		// E5: the wizard, then its ready screen; the request id is the inbox id.
		rid, review := e.wizardToReview(conn, "support")
		p = e.get(review)
		checkPage(t, review, p)
		for _, want := range []string{"support@agentmail.to", "Create email address", "Live connection", "Anyone can email an unrestricted inbox",
			"Mail Assistant is not a low-trust agent"} {
			if !strings.Contains(p.body, want) {
				t.Errorf("review lacks %q", want)
			}
		}
		if loc := location(t, e.create(review, rid)); loc != e.am()+"/setup/"+rid+"/done" {
			t.Fatalf("create: %s", loc)
		}
		if got := e.api.JSON("GET", "/api/email/inboxes/"+rid, nil, 200); got["status"] != "active" || got["credentialConnectionId"] != conn {
			t.Fatalf("inbox: %v", got)
		}
		p = e.get(e.am() + "/setup/" + rid + "/done")
		checkPage(t, "done", p)
		if !strings.Contains(p.body, "Your agent’s email is ready") || !strings.Contains(p.body, "paperclipai emulator send --url http://127.0.0.1:") {
			t.Fatalf("ready screen: %s", p.body)
		}
		if loc := location(t, e.get(e.am()+"/setup/"+rid+"?step=agent")); loc != e.am()+"/setup/"+rid+"/done" {
			t.Fatalf("an active setup's wizard: %s", loc)
		}
		if p := e.get(c + "/apps"); !strings.Contains(p.body, "1 connection · 1 email address") || !strings.Contains(p.body, ">Manage<") {
			t.Errorf("apps with a connection: %s", p.body)
		}
		for _, path := range []string{e.am(), e.am() + "?fragment=inboxes"} {
			if p := e.get(path); p.status != 200 || !strings.Contains(p.body, "support@agentmail.to") {
				t.Errorf("%s: %d", path, p.status)
			}
		}
		checkPage(t, e.am(), e.get(e.am()))
		for _, tab := range []string{"settings", "access", "conversations", "activity", "disconnect"} {
			path := e.am() + "/inboxes/" + rid + "/" + tab
			p := e.get(path)
			checkPage(t, path, p)
			if tab == "settings" && (!strings.Contains(p.body, "Receiving email") || !strings.Contains(p.body, `id="pause"`)) {
				t.Errorf("settings: %s", p.body)
			}
			if tab == "access" && !strings.Contains(p.body, "Any human in the organization") {
				t.Errorf("access tab: %s", p.body)
			}
		}
		// Reconnect with no key and the same mode re-renders; with no key
		// and another mode it asks the API (the mode alone may change;
		// here the API refuses webhooks without a public HTTPS URL); with
		// the key it succeeds.
		settings := e.am() + "/inboxes/" + rid + "/settings"
		p = e.post(settings, e.am()+"/inboxes/"+rid+"/reconnect", url.Values{"apiKey": {""}, "receiveMode": {"websocket"}})
		if p.status != 400 || !strings.Contains(p.body, "Enter a new API key or choose a different receiving mode.") {
			t.Fatalf("empty reconnect: %d", p.status)
		}
		p = e.post(settings, e.am()+"/inboxes/"+rid+"/reconnect", url.Values{"apiKey": {""}, "receiveMode": {"webhook"}})
		if p.status != 400 || !strings.Contains(p.body, "Webhook receiving requires a public HTTPS URL") {
			t.Fatalf("mode-only reconnect: %d %s", p.status, p.body)
		}
		if loc := location(t, e.post(settings, e.am()+"/inboxes/"+rid+"/reconnect", url.Values{"apiKey": {sentinel}, "receiveMode": {"websocket"}})); loc != settings {
			t.Fatalf("reconnect: %s", loc)
		}
		if p := e.get(e.am() + "/inboxes/" + rid + "/access"); !strings.Contains(p.body, "This inbox uses its own API key.") {
			t.Errorf("access after reconnect: %s", p.body)
		}

		// The sentinel: nowhere in any answer, redirect or log line.
		if strings.Contains(e.seen.String(), sentinel) {
			t.Error("the API key appears in a UI answer")
		}
		if strings.Contains(e.inst.Logs.String(), sentinel) {
			t.Error("the API key appears in the server log")
		}
	})
}

// orgKey creates a second emulator organization and returns its key.
func (e *emailEnv) orgKey(name string) string {
	_, k := e.em.CreateOrganization(name)
	return k
}

func (e *emailEnv) provider(key string) *agentmail.Client {
	c, err := agentmail.New(agentmail.Options{BaseURL: e.em.APIURL(), APIKey: key})
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}
