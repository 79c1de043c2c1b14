package ui

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/paperclipai/paperclipai/internal/authz"
	"github.com/paperclipai/paperclipai/internal/domain"
)

//go:embed templates
var templateFS embed.FS

// templates holds one parsed set per page (layout + partials + the page).
type templates struct {
	pages map[string]*template.Template
}

func loadTemplates() (*templates, error) {
	base, err := template.New("").Funcs(funcMap()).ParseFS(templateFS, "templates/*.html")
	if err != nil {
		return nil, fmt.Errorf("ui templates: %w", err)
	}
	files, err := fs.Glob(templateFS, "templates/pages/*.html")
	if err != nil {
		return nil, err
	}
	t := &templates{pages: map[string]*template.Template{}}
	for _, f := range files {
		p, err := template.Must(base.Clone()).ParseFS(templateFS, f)
		if err != nil {
			return nil, fmt.Errorf("ui templates: %w", err)
		}
		t.pages[strings.TrimSuffix(path.Base(f), ".html")] = p
	}
	return t, nil
}

// crumb is one breadcrumb link.
type crumb struct{ Label, Href string }

// view is what every page template receives; Data is the page's own.
type view struct {
	Title  string
	Bare   bool // no company navigation (sign-in, instance pages)
	Nav    string
	Crumbs []crumb
	Flash  string
	Data   any

	// Filled by render.
	CSRF      string
	Company   *companyView
	Companies []domain.Company
	Caps      caps
	User      string
	SignedIn  bool
	LocalMode bool
	Footer    cachedHealth
	// ReviewCount is the company's emails awaiting review (the Review
	// navigation badge; 0 for those who may not review).
	ReviewCount int
	// ReviewPollMS is how often the badge refreshes.
	ReviewPollMS int
}

type companyView struct{ ID, Name string }

// cachedHealth is the footer's version · database · mode line.
type cachedHealth struct {
	Version, Database, Mode string
	at                      time.Time
}

func (u *UI) footer(c *rc) cachedHealth {
	u.healthMu.Lock()
	h := u.health
	u.healthMu.Unlock()
	if !h.at.IsZero() && u.now().Sub(h.at) < 30*time.Second {
		return h
	}
	out, _ := u.client.Health(acting(c.r.Context(), authz.Actor{}))
	h = cachedHealth{Version: out.Version, Database: out.Database, Mode: u.d.Config.DeploymentMode, at: u.now()}
	u.healthMu.Lock()
	u.health = h
	u.healthMu.Unlock()
	return h
}

// render writes a page, or only its fragment when ?fragment= names one.
func (c *rc) render(status int, page string, v view) {
	t := c.u.tpl.pages[page]
	if t == nil {
		panic("ui: no template " + page)
	}
	h := c.w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	v.CSRF = c.CSRF()
	if c.cid != "" {
		cv := c.company
		v.Company = &cv
		v.Caps = c.caps
	}
	v.ReviewPollMS = c.u.pollInterval(10000)
	if frag := c.r.URL.Query().Get("fragment"); (frag == "" || frag == "nav-review") && c.cid != "" {
		if n, err := c.cl().ReviewCount(c.ctx(), c.cid); c.check(err) == nil {
			v.ReviewCount = n
		}
	}
	if frag := c.r.URL.Query().Get("fragment"); frag != "" && c.r.Method == http.MethodGet {
		c.fragment(t, frag, status, v)
		return
	}
	if v.Flash == "" {
		v.Flash = c.takeFlash()
	}
	v.LocalMode = c.actor.LocalBoard
	v.SignedIn = c.session != nil
	if c.actor.Kind != "" {
		if !v.Bare {
			// First: the list comes with /api/me in one call.
			v.Companies = c.Companies()
		}
		me := c.Me()
		v.User = me.User.Email
		if c.cid == "" {
			v.Caps = caps{InstanceAdmin: me.User.IsInstanceAdmin && me.KeyCompanyID == ""}
		}
	}
	v.Footer = c.u.footer(c)
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "layout", v); err != nil {
		c.u.log.Error("render page", "page", page, "err", err)
		http.Error(c.w, msgSomethingWrong, http.StatusInternalServerError)
		return
	}
	c.w.WriteHeader(status)
	_, _ = c.w.Write(buf.Bytes())
}

// fragment writes one named region of a page with an ETag; a matching
// If-None-Match answers 304 so idle polling costs no body.
func (c *rc) fragment(t *template.Template, name string, status int, v view) {
	ft := t.Lookup("frag-" + name)
	if ft == nil || status != http.StatusOK {
		if status == http.StatusOK {
			status = http.StatusNotFound
		}
		http.Error(c.w, http.StatusText(status), status)
		return
	}
	var buf bytes.Buffer
	if err := ft.Execute(&buf, v); err != nil {
		c.u.log.Error("render fragment", "fragment", name, "err", err)
		http.Error(c.w, msgSomethingWrong, http.StatusInternalServerError)
		return
	}
	sum := sha256.Sum256(buf.Bytes())
	etag := `"` + hex.EncodeToString(sum[:8]) + `"`
	h := c.w.Header()
	h.Set("ETag", etag)
	h.Set("Vary", "Cookie")
	if match := c.r.Header.Get("If-None-Match"); match != "" && match == etag {
		c.w.WriteHeader(http.StatusNotModified)
		return
	}
	_, _ = c.w.Write(buf.Bytes())
}

// redirect answers 303 See Other to path with an optional flash message.
func (c *rc) redirect(to, flash string) {
	if flash != "" {
		c.u.setFlash(c.w, c.r, flash)
	}
	http.Redirect(c.w, c.r, to, http.StatusSeeOther)
}

const flashCookie = "paperclip_flash"

// setFlash stores a signed one-time message for the next page.
func (u *UI) setFlash(w http.ResponseWriter, r *http.Request, msg string) {
	if len(msg) > 200 {
		msg = msg[:200]
	}
	val := base64.RawURLEncoding.EncodeToString([]byte(msg)) + "." +
		base64.RawURLEncoding.EncodeToString(mac(u.keys.flash, msg))
	http.SetCookie(w, &http.Cookie{Name: flashCookie, Value: val, Path: "/", MaxAge: 60, HttpOnly: true,
		Secure: u.secure(r), SameSite: http.SameSiteLaxMode})
}

// takeFlash reads and clears the flash message of a GET.
func (c *rc) takeFlash() string {
	if c.r.Method != http.MethodGet || c.r.URL.Query().Get("fragment") != "" {
		return ""
	}
	ck, err := c.r.Cookie(flashCookie)
	if err != nil {
		return ""
	}
	http.SetCookie(c.w, &http.Cookie{Name: flashCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true,
		Secure: c.u.secure(c.r), SameSite: http.SameSiteLaxMode})
	msgB64, sigB64, ok := strings.Cut(ck.Value, ".")
	if !ok {
		return ""
	}
	msg, err1 := base64.RawURLEncoding.DecodeString(msgB64)
	sig, err2 := base64.RawURLEncoding.DecodeString(sigB64)
	if err1 != nil || err2 != nil || !hmac.Equal(sig, mac(c.u.keys.flash, string(msg))) {
		return ""
	}
	return string(msg)
}

// errorData is the error page's content.
type errorData struct {
	Status  int
	Heading string
	Message string
	// Detail is the API's reason for a refusal, shown under the message.
	Detail    string
	RequestID string
}

// errorPage renders an HTML error page with status.
func (c *rc) errorPage(status int, msg string) {
	c.renderError(status, errorData{Status: status, Heading: http.StatusText(status), Message: msg})
}

func (c *rc) renderError(status int, d errorData) {
	if c.r.URL.Query().Get("fragment") != "" {
		http.Error(c.w, d.Message, status)
		return
	}
	switch status {
	case http.StatusNotFound:
		d.Heading = msgNotFound
	case http.StatusForbidden:
		d.Heading = "Not allowed"
	case http.StatusUnauthorized:
		d.Heading = "Sign in required"
	}
	c.render(status, "error", view{Title: d.Heading, Bare: c.cid == "", Data: d})
}

func (c *rc) notFound() { c.errorPage(http.StatusNotFound, msgNotFoundText) }

// fail renders the page for an API error that ends the request.
func (c *rc) fail(e *APIError) {
	switch {
	case e.Status == http.StatusNotFound:
		c.notFound()
	case e.Status >= 500:
		c.renderError(e.Status, errorData{Status: e.Status, Heading: "Something went wrong",
			Message: fmt.Sprintf("Something went wrong (request %s).", e.RequestID), RequestID: e.RequestID})
	case e.Status == http.StatusForbidden:
		c.forbidden(c.routeAction(), e.Message)
	default:
		c.renderError(e.Status, errorData{Status: e.Status, Heading: http.StatusText(e.Status), Message: e.Message})
	}
}

// forbidden renders the 403 page naming the refused action, with the
// API's reason (if any) under it.
func (c *rc) forbidden(action, reason string) {
	reason = strings.TrimPrefix(reason, "forbidden: ")
	if reason != "" {
		reason = "Reason: " + reason
	}
	c.renderError(http.StatusForbidden, errorData{Status: http.StatusForbidden, Message: forbiddenText(action), Detail: reason})
}

// refusedUnseen renders the 403 page for a refusal of a form the actor is
// not shown (a viewer's forged post): re-rendering the page would hide the
// error along with the form. It reports whether it did.
func (c *rc) refusedUnseen(e *APIError, formShown bool) bool {
	if e.Status != http.StatusForbidden || formShown {
		return false
	}
	c.fail(e)
	return true
}

// nameRefusal marks an API 403 with the route's action for the form error
// panel. Refusals with a code (email turned off, an action policy) and the
// email pages' 403s keep their own text: there a 403 is often about an
// AgentMail key, not the person's permission, and those pages name the
// action themselves.
func (c *rc) nameRefusal(e *APIError) {
	if e == nil || e.Status != http.StatusForbidden || e.Code != "" || strings.Contains(c.r.Pattern, "/c/{cid}/apps") {
		return
	}
	e.Refused, e.Reason = forbiddenText(c.routeAction()), strings.TrimPrefix(e.Message, "forbidden: ")
}

// plainError renders a bare error page without resolving an actor.
func (u *UI) plainError(w http.ResponseWriter, r *http.Request, status int, msg string) {
	c := &rc{u: u, w: w, r: r}
	c.errorPage(status, msg)
}

// partial writes one named template of a page's set (an answer to a
// script's POST, so not cached).
func (c *rc) partial(page, name string, v view) {
	t := c.u.tpl.pages[page].Lookup(name)
	h := c.w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	v.CSRF = c.CSRF()
	if err := t.Execute(c.w, v); err != nil {
		c.u.log.Error("render partial", "name", name, "err", err)
	}
}

// submit makes a form's API call as the request's actor. On success it redirects
// with a flash; a refusal of a form the user could not see answers as a
// page (refusedUnseen); any other error goes to failed, which re-renders
// the form with it.
func (c *rc) submit(call func(context.Context) error, formShown bool, failed func(*APIError), to, flash string) {
	if e := c.check(call(c.ctx())); e != nil {
		if !c.refusedUnseen(e, formShown) {
			failed(e)
		}
		return
	}
	c.redirect(to, flash)
}
