package ui

import (
	"container/list"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/paperclipai/paperclipai/internal/api"
	"github.com/paperclipai/paperclipai/internal/authz"
	"github.com/paperclipai/paperclipai/internal/config"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/store"
	"github.com/paperclipai/paperclipai/internal/websec"
)

// Session lifetimes (authenticated mode).
const (
	sessionIdle     = 12 * time.Hour
	sessionAbsolute = 7 * 24 * time.Hour
	sessionTouch    = time.Minute
	loginFailLimit  = 10
	loginFailWindow = 5 * time.Minute
)

// rc is one UI request: the writer, the request, the resolved actor and what
// the page has loaded so far.
type rc struct {
	u       *UI
	w       http.ResponseWriter
	r       *http.Request
	actor   authz.Actor
	session *store.UISession
	me      *api.Me
	// companies is the switcher's list (loaded once).
	companies       []domain.Company
	companiesLoaded bool
	// Company pages.
	cid     string
	company companyView
	caps    caps
}

// caps are what the actor may do in the current company (to decide what to
// show; the API enforces).
type caps struct {
	Read, Write, Admin, Manager, InstanceAdmin bool
	Role                                       string
}

func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func (u *UI) sessionCookieName(r *http.Request) string {
	if u.secure(r) {
		return "__Host-paperclip_session"
	}
	return "paperclip_session"
}

func (u *UI) secure(r *http.Request) bool {
	return r.TLS != nil || strings.HasPrefix(u.d.Config.PublicURL, "https://")
}

var errNoSession = errors.New("no session")

// resolve finds the request's actor: the local board in local_trusted mode
// from loopback, or the board session of the cookie in authenticated mode.
func (u *UI) resolve(r *http.Request) (authz.Actor, *store.UISession, error) {
	ctx := r.Context()
	if u.d.Config.DeploymentMode == config.ModeLocalTrusted {
		// Like the API: loopback peer and a local Host name (a DNS-rebinding
		// page reaches a loopback server under a name of its own).
		if !isLoopback(r.RemoteAddr) || !websec.IsLocalHost(r.Host) {
			return authz.Actor{}, nil, errRemote
		}
		usr, err := u.d.Store.GetUserByEmail(ctx, u.d.Store.DB, store.LocalBoardEmail)
		if err != nil {
			return authz.Actor{}, nil, err
		}
		return authz.Actor{Kind: authz.KindBoard, UserID: usr.ID, IsInstanceAdmin: true, LocalBoard: true}, nil, nil
	}
	ck, err := r.Cookie(u.sessionCookieName(r))
	if err != nil || !strings.HasPrefix(ck.Value, "pcs_") {
		return authz.Actor{}, nil, errNoSession
	}
	now := u.now().UTC()
	s, err := u.d.Store.LookupUISession(ctx, u.d.Store.DB, store.HashToken(ck.Value), now, now.Add(-sessionIdle))
	if err != nil {
		return authz.Actor{}, nil, errNoSession
	}
	usr, err := u.d.Store.GetUser(ctx, u.d.Store.DB, s.UserID)
	if err != nil {
		return authz.Actor{}, nil, errNoSession
	}
	if now.Sub(s.LastSeenAt) > sessionTouch {
		// Sliding idle timeout, written at most once a minute.
		_ = u.d.Store.TouchUISession(ctx, u.d.Store.DB, s.ID, now)
	}
	return authz.Actor{Kind: authz.KindBoard, UserID: usr.ID, IsInstanceAdmin: usr.IsInstanceAdmin, KeyCompanyID: s.KeyCompanyID}, &s, nil
}

var errRemote = errors.New("remote")

// csrfBinding is what the request's form token is bound to.
func (c *rc) csrfBinding() string {
	if c.session != nil {
		return "session:" + c.session.ID
	}
	return "local-board"
}

// CSRF returns the form token for this request's forms.
func (c *rc) CSRF() string { return c.u.csrfToken(c.csrfBinding()) }

// page wraps a handler that needs a board actor: it resolves the actor,
// redirects to sign-in when there is none and checks the form token of
// every POST. Only the attachment upload route (uploadRoute) takes a
// multipart body, and checks its token itself after parsing; a multipart
// POST to any other route is refused (415).
func (u *UI) page(fn func(c *rc)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		a, s, err := u.resolve(r)
		c := &rc{u: u, w: w, r: r, actor: a, session: s}
		switch {
		case errors.Is(err, errRemote):
			u.plainError(w, r, http.StatusForbidden, msgRemote)
			return
		case errors.Is(err, errNoSession):
			if r.Method == http.MethodGet && r.URL.Query().Get("fragment") == "" {
				http.Redirect(w, r, "/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
				return
			}
			u.plainError(w, r, http.StatusUnauthorized, msgSessionExpired)
			return
		case err != nil:
			u.log.Error("resolve ui actor", "err", err)
			u.plainError(w, r, http.StatusInternalServerError, msgSomethingWrong)
			return
		}
		if r.Method == http.MethodPost {
			// Why by pattern: the upload handler must parse the multipart
			// body before it can read the token in it, so only that route
			// may skip this check; a multipart body anywhere else would
			// carry a form past the token check, so it is refused.
			mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
			switch {
			case r.Pattern == uploadRoute && mt == "multipart/form-data":
			case strings.HasPrefix(mt, "multipart/"):
				c.errorPage(http.StatusUnsupportedMediaType, msgMultipartRefused)
				return
			default:
				r.Body = http.MaxBytesReader(w, r.Body, 256<<10)
				if !u.validCSRF(r, c.csrfBinding()) {
					c.errorPage(http.StatusForbidden, msgFormExpired)
					return
				}
			}
		}
		fn(c)
	}
}

// Me returns the actor's /api/me answer (once per request).
func (c *rc) Me() *api.Me {
	if c.me == nil {
		c.loadMe(false)
	}
	return c.me
}

// Companies returns the companies visible to the actor (once per request):
// read together with /api/me (?include=companies) when /api/me is not
// read yet, so a page's chrome costs one API call.
func (c *rc) Companies() []domain.Company {
	switch {
	case c.companiesLoaded:
	case c.me == nil:
		c.loadMe(true)
	default:
		c.companiesLoaded = true
		_ = into(c, &c.companies)(c.cl().Companies(c.ctx()))
	}
	return c.companies
}

// loadMe reads /api/me, with the actor's companies when withCompanies is
// set. A refused read leaves an empty answer (the API's refusal decides
// what the page shows).
func (c *rc) loadMe(withCompanies bool) {
	read := c.cl().Me
	if withCompanies {
		read = c.cl().MeWithCompanies
	}
	me, err := read(c.ctx())
	if c.check(err) != nil {
		me = api.Me{LocalBoard: c.actor.LocalBoard}
	}
	c.me = &me
	if withCompanies {
		c.companiesLoaded = true
		c.companies = make([]domain.Company, 0, len(me.Companies))
		for _, co := range me.Companies {
			c.companies = append(c.companies, co.Company)
		}
	}
}

// api calls the JSON API by path as the request's actor (the untyped
// escape hatch: pages call the typed client, c.cl()). A permission refusal
// learns the route's action, so a form shown again names what was refused.
func (c *rc) api(method, path string, in, out any) *APIError {
	e := c.u.callAPI(c.r.Context(), c.actor, method, path, in, out)
	c.nameRefusal(e)
	return e
}

// capsFor computes the actor's capabilities in company cid from /api/me.
func (c *rc) capsFor(cid string) caps {
	me := c.Me()
	if c.actor.LocalBoard || c.actor.IsInstanceAdmin {
		return caps{Read: true, Write: true, Admin: true, Manager: true, InstanceAdmin: c.actor.KeyCompanyID == "", Role: "owner"}
	}
	for _, m := range me.Memberships {
		if m.CompanyID == cid {
			w := m.Role != "viewer"
			return caps{Read: true, Write: w, Admin: m.Role == "owner" || m.Role == "admin", Manager: m.CanManageConnections, Role: m.Role}
		}
	}
	return caps{}
}

// loginLimiter counts failed sign-ins per client address prefix (in
// memory, per replica). Only failures are counted and only failures are
// refused: a valid key always signs in, so a stranger's bad guesses from
// a shared address (an office NAT, the documented proxy) lock nobody out.
// Memory is bounded: past max prefixes the one whose last failure is
// oldest is forgotten, never everyone at once.
type loginLimiter struct {
	mu    sync.Mutex
	max   int
	byKey map[string]*list.Element
	// lru orders the entries by last failure, most recent at the front.
	lru *list.List
}

type limiterEntry struct {
	key   string
	fails []time.Time
}

// loginLimiterMax bounds the prefixes remembered.
const loginLimiterMax = 10000

func newLoginLimiter(max int) *loginLimiter {
	return &loginLimiter{max: max, byKey: map[string]*list.Element{}, lru: list.New()}
}

// limiterKey is the prefix an address is counted under: the address for
// IPv4, its /64 for IPv6 (one subscriber's allocation, so an attacker
// cannot rotate through a network of addresses).
func limiterKey(a netip.Addr) string {
	if !a.IsValid() {
		return "unknown"
	}
	if a.Is4() {
		return a.String()
	}
	p, _ := a.Prefix(64)
	return p.String()
}

// recent returns e's failures inside the window (dropping older ones).
func (e *limiterEntry) recent(now time.Time) []time.Time {
	keep := e.fails[:0]
	for _, t := range e.fails {
		if now.Sub(t) < loginFailWindow {
			keep = append(keep, t)
		}
	}
	e.fails = keep
	return keep
}

// blocked reports whether key has too many recent failures.
func (l *loginLimiter) blocked(key string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	el, ok := l.byKey[key]
	if !ok {
		return false
	}
	e := el.Value.(*limiterEntry)
	if len(e.recent(now)) == 0 {
		l.lru.Remove(el)
		delete(l.byKey, key)
		return false
	}
	return len(e.fails) >= loginFailLimit
}

// fail records a failed sign-in from key.
func (l *loginLimiter) fail(key string, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	el, ok := l.byKey[key]
	if !ok {
		for l.lru.Len() >= l.max {
			old := l.lru.Back()
			l.lru.Remove(old)
			delete(l.byKey, old.Value.(*limiterEntry).key)
		}
		el = l.lru.PushFront(&limiterEntry{key: key})
		l.byKey[key] = el
	}
	l.lru.MoveToFront(el)
	e := el.Value.(*limiterEntry)
	e.recent(now)
	if len(e.fails) >= loginFailLimit {
		// Only whether the limit is reached matters: keep the newest.
		e.fails = e.fails[1:]
	}
	e.fails = append(e.fails, now)
}

// clientKey is the limiter key of r's client (PAPERCLIP_TRUSTED_PROXIES
// decides whose X-Forwarded-For counts).
func (u *UI) clientKey(r *http.Request) string {
	return limiterKey(u.d.Config.ClientAddr(r.RemoteAddr, r.Header.Values("X-Forwarded-For")))
}

type loginData struct {
	Next  string
	Error string
	CSRF  string
}

func (u *UI) loginPage(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	if u.d.Config.DeploymentMode == config.ModeLocalTrusted {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	if _, _, err := u.resolve(r); err == nil {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	c := &rc{u: u, w: w, r: r}
	c.renderLogin(http.StatusOK, loginData{Next: safeNext(r.URL.Query().Get("next"))})
}

// loginCookieName is the cookie that binds the sign-in form's token to
// one browser (a random value, set by the sign-in page).
func (u *UI) loginCookieName(r *http.Request) string {
	if u.secure(r) {
		return "__Host-paperclip_login"
	}
	return "paperclip_login"
}

// loginBinding returns what the sign-in form's token is bound to: the
// browser's login cookie, set here when missing (create). Without it, a
// constant token would let another site sign a visitor in to the other
// site's account (login CSRF).
func (c *rc) loginBinding(create bool) (string, bool) {
	name := c.u.loginCookieName(c.r)
	if ck, err := c.r.Cookie(name); err == nil && strings.HasPrefix(ck.Value, "pcl_") && len(ck.Value) < 100 {
		return "login:" + ck.Value, true
	}
	if !create {
		return "", false
	}
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	v := "pcl_" + base64.RawURLEncoding.EncodeToString(b)
	http.SetCookie(c.w, &http.Cookie{Name: name, Value: v, Path: "/", HttpOnly: true, Secure: c.u.secure(c.r), SameSite: http.SameSiteLaxMode})
	// The form below is rendered with this request, so the new value
	// must count for it too.
	c.r.AddCookie(&http.Cookie{Name: name, Value: v})
	return "login:" + v, true
}

func (c *rc) renderLogin(status int, d loginData) {
	binding, _ := c.loginBinding(true)
	d.CSRF = c.u.csrfToken(binding)
	if d.Next == "/" {
		d.Next = ""
	}
	c.render(status, "login", view{Title: "Sign in", Bare: true, Flash: c.takeFlash(), Data: d})
}

func (u *UI) loginSubmit(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	if u.d.Config.DeploymentMode == config.ModeLocalTrusted {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	c := &rc{u: u, w: w, r: r}
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	if binding, ok := c.loginBinding(false); !ok || !u.validCSRF(r, binding) {
		c.errorPage(http.StatusForbidden, msgFormExpired)
		return
	}
	key := strings.TrimSpace(r.PostFormValue("key"))
	next := safeNext(r.PostFormValue("next"))
	if key != "" {
		u.d.Redact(key)
	}
	now := u.now().UTC()
	client := u.clientKey(r)
	// refuse answers a failed sign-in: 429 once the client's prefix has
	// too many recent failures (its valid keys still sign in), else msg.
	refuse := func(msg string) {
		if u.limiter.blocked(client, now) {
			c.renderLogin(http.StatusTooManyRequests, loginData{Next: next, Error: msgLoginRateLimited})
			return
		}
		u.limiter.fail(client, now)
		c.renderLogin(http.StatusUnauthorized, loginData{Next: next, Error: msg})
	}
	if strings.HasPrefix(key, "pcr_") {
		refuse(msgLoginRunToken)
		return
	}
	ctx := r.Context()
	st := u.d.Store
	var s store.UISession
	ok := false
	if strings.HasPrefix(key, "pcb_") {
		if k, err := st.LookupBoardKey(ctx, st.DB, store.HashToken(key)); err == nil {
			if usr, err := st.GetUser(ctx, st.DB, k.UserID); err == nil {
				_ = st.NoteBoardKeyUsed(ctx, st.DB, k) // signing in is a use; never refuses
				s = store.UISession{UserID: usr.ID, BoardKeyID: k.ID, KeyCompanyID: k.CompanyID,
					CreatedAt: now, LastSeenAt: now, ExpiresAt: now.Add(sessionAbsolute)}
				ok = true
			}
		}
	}
	if !ok {
		refuse(msgLoginInvalid)
		return
	}
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	token := "pcs_" + base64.RawURLEncoding.EncodeToString(b)
	s.TokenHash = store.HashToken(token)
	if err := st.CreateUISession(ctx, st.DB, &s); err != nil {
		u.log.Error("create ui session", "err", err)
		c.errorPage(http.StatusInternalServerError, msgSomethingWrong)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: u.sessionCookieName(r), Value: token, Path: "/", HttpOnly: true,
		Secure: u.secure(r), SameSite: http.SameSiteLaxMode})
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (u *UI) logout(c *rc) {
	if c.session != nil {
		if err := u.d.Store.RevokeUISession(c.r.Context(), u.d.Store.DB, c.session.ID, u.now()); err != nil {
			u.log.Error("revoke ui session", "err", err)
		}
	}
	http.SetCookie(c.w, &http.Cookie{Name: u.sessionCookieName(c.r), Value: "", Path: "/", MaxAge: -1, HttpOnly: true,
		Secure: u.secure(c.r), SameSite: http.SameSiteLaxMode})
	if u.d.Config.DeploymentMode == config.ModeLocalTrusted {
		c.redirect("/", "")
		return
	}
	c.redirect("/login", msgSignedOut)
}
