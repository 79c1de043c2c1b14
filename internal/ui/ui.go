// Package ui is the control plane's web UI: server-rendered html/template
// pages with one hand-written stylesheet and script, no framework and no
// build step. Every page works without JavaScript; the script only adds
// live refresh, busy states, copy buttons and local times.
//
// The UI is an in-process client of the JSON API: handlers resolve the
// browser's actor (local board or signed-in board session), then dispatch
// requests to the API handler with that actor preset, so authorization,
// validation, audit and error text have one code path. Forms post to UI
// routes, which act through the API and redirect (Post/Redirect/Get) with a
// flash message.
package ui

import (
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/paperclipai/paperclipai/internal/apiclient"
	"github.com/paperclipai/paperclipai/internal/config"
	"github.com/paperclipai/paperclipai/internal/store"
)

// Deps are what the UI needs from the server.
type Deps struct {
	Config config.Config
	// API is the /api handler (with its middleware); the UI calls it in-process.
	API http.Handler
	// Store is used for board sessions only; business data goes through API.
	Store *store.Store
	// MasterKey is the vault master key; the UI derives its CSRF and flash
	// keys from it, so every replica agrees without storing anything.
	MasterKey []byte
	// Redact registers a secret value (a submitted key) with the log redactor.
	Redact func(string)
	Logger *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// UI serves the web UI.
type UI struct {
	d       Deps
	mux     *http.ServeMux
	keys    keys
	tpl     *templates
	log     *slog.Logger
	now     func() time.Time
	pollMS  int // test override of every poll interval (config.Config.UIPollMS)
	limiter *loginLimiter
	// client is the typed API client over the in-process transport: every
	// business read and write of a page goes through it as the page's
	// actor.
	client *apiclient.Client
	// stopped closes when the server shuts down (ends event streams).
	stopped  chan struct{}
	stopOnce sync.Once

	healthMu sync.Mutex
	health   cachedHealth

	email emailState // the email pages' caches
}

// New builds the UI handler.
func New(d Deps) (*UI, error) {
	u := &UI{d: d, mux: http.NewServeMux(), log: d.Logger, now: d.Now, limiter: newLoginLimiter(loginLimiterMax), stopped: make(chan struct{}),
		client: apiclient.InProcess(d.API), pollMS: d.Config.UIPollMS}
	if u.log == nil {
		u.log = slog.New(slog.DiscardHandler)
	}
	if u.now == nil {
		u.now = time.Now
	}
	if d.Redact == nil {
		u.d.Redact = func(string) {}
	}
	var err error
	if u.keys, err = deriveKeys(d.MasterKey); err != nil {
		return nil, err
	}
	if u.tpl, err = loadTemplates(); err != nil {
		return nil, err
	}
	u.routes()
	return u, nil
}

// ServeHTTP sets the security headers of every UI response and dispatches.
// The server mounts the UI behind its request guard (internal/websec: Host
// allowlist in local_trusted mode, cross-origin refusal of unsafe methods);
// the per-session form token checked on every POST backs that up.
func (u *UI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	setSecurityHeaders(w.Header())
	u.mux.ServeHTTP(w, r)
}

// pollInterval returns ms, or the test override.
func (u *UI) pollInterval(ms int) int {
	if u.pollMS > 0 {
		return u.pollMS
	}
	return ms
}

// uploadRoute is the one UI route whose POST body may be multipart/form-data
// (written out in routes too, where the route table's tests read it).
const uploadRoute = "POST /c/{cid}/tasks/{tid}/attachments"

func (u *UI) routes() {
	m := u.mux
	m.HandleFunc("GET /static/{name}", u.static)
	m.HandleFunc("GET /favicon.ico", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, assetPath("favicon.svg"), http.StatusMovedPermanently)
	})
	m.HandleFunc("GET /login", u.loginPage)
	m.HandleFunc("POST /login", u.loginSubmit)
	m.HandleFunc("POST /logout", u.page(u.logout))

	m.HandleFunc("GET /{$}", u.page(u.home))
	m.HandleFunc("POST /companies", u.page(u.createCompany))
	m.HandleFunc("GET /go", u.page(u.goCompany))
	m.HandleFunc("GET /settings", u.page(u.settingsPage))
	m.HandleFunc("POST /settings", u.page(u.saveSettings))

	m.HandleFunc("GET /c/{cid}", u.company(u.overview))
	m.HandleFunc("GET /c/{cid}/tasks", u.company(u.tasksPage))
	m.HandleFunc("GET /c/{cid}/tasks/new", u.company(u.newTaskPage))
	m.HandleFunc("POST /c/{cid}/tasks", u.company(u.createTask))
	m.HandleFunc("GET /c/{cid}/tasks/{tid}", u.company(u.taskPage))
	m.HandleFunc("POST /c/{cid}/tasks/{tid}", u.company(u.updateTask))
	m.HandleFunc("POST /c/{cid}/tasks/{tid}/comments", u.company(u.addComment))
	m.HandleFunc("POST /c/{cid}/tasks/{tid}/wake", u.company(u.wakeForTask))
	m.HandleFunc("POST /c/{cid}/tasks/{tid}/attachments", u.company(u.uploadAttachment)) // uploadRoute
	m.HandleFunc("GET /c/{cid}/tasks/{tid}/attachments/{aid}", u.company(u.legacyAttachment))
	m.HandleFunc("GET /c/{cid}/attachments/{aid}", u.company(u.downloadAttachment))
	m.HandleFunc("POST /c/{cid}/tasks/{tid}/deliveries/{pid}/resolve", u.company(u.resolveDelivery))
	m.HandleFunc("GET /c/{cid}/runs", u.company(u.runsPage))
	m.HandleFunc("GET /c/{cid}/email", u.company(u.emailListPage))
	m.HandleFunc("GET /c/{cid}/events", u.company(u.events))
	m.HandleFunc("GET /c/{cid}/runs/{rid}", u.company(u.runPage))

	m.HandleFunc("GET /c/{cid}/agents", u.company(u.agentsPage))
	m.HandleFunc("GET /c/{cid}/agents/new", u.company(u.newAgentPage))
	m.HandleFunc("POST /c/{cid}/agents", u.company(u.createAgent))
	m.HandleFunc("GET /c/{cid}/agents/{aid}", u.company(u.agentPage))
	m.HandleFunc("POST /c/{cid}/agents/{aid}", u.company(u.saveAgent))
	m.HandleFunc("GET /c/{cid}/agents/{aid}/edit", u.company(u.editAgentPage))
	m.HandleFunc("POST /c/{cid}/agents/{aid}/status", u.company(u.agentStatus))
	m.HandleFunc("POST /c/{cid}/agents/{aid}/wake", u.company(u.wakeAgent))
	m.HandleFunc("GET /c/{cid}/agents/{aid}/trust", u.company(u.trustPage))
	m.HandleFunc("POST /c/{cid}/agents/{aid}/trust", u.company(u.saveTrust))

	m.HandleFunc("GET /c/{cid}/projects", u.company(u.projectsPage))
	m.HandleFunc("POST /c/{cid}/projects", u.company(u.createProject))
	m.HandleFunc("POST /c/{cid}/environments", u.company(u.createEnvironment))
	m.HandleFunc("GET /c/{cid}/activity", u.company(u.activityPage))
	m.HandleFunc("GET /c/{cid}/search", u.company(u.searchPage))
	m.HandleFunc("GET /c/{cid}/members", u.company(u.membersPage))
	m.HandleFunc("POST /c/{cid}/members", u.company(u.addMember))
	m.HandleFunc("POST /c/{cid}/board-keys", u.company(u.createBoardKey))
	m.HandleFunc("GET /c/{cid}/retention", u.company(u.retentionPage))
	m.HandleFunc("POST /c/{cid}/retention", u.company(u.saveRetention))
	m.HandleFunc("POST /c/{cid}/board-keys/{kid}/revoke", u.company(u.revokeBoardKey))
	m.HandleFunc("POST /c/{cid}/members/{uid}/remove", u.company(u.removeMember))

	u.emailRoutes(m)
	u.reviewRoutes(m)
	u.notificationRoutes(m)
	u.adminRoutes(m)

	m.HandleFunc("/", u.page(func(c *rc) { c.notFound() }))
}
