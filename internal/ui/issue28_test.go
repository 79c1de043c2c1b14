package ui_test

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"mime/multipart"
	"net/http"
	"net/http/cookiejar"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/config"
	"github.com/paperclipai/paperclipai/internal/emulator"
	"github.com/paperclipai/paperclipai/internal/safetext"
	"github.com/paperclipai/paperclipai/internal/testkit"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
)

// multipartPost posts fields as multipart/form-data, as an HTML form with
// enctype="multipart/form-data" on another site would.
func (e *env) multipartPost(path string, fields map[string]string) page {
	e.t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for k, v := range fields {
		_ = mw.WriteField(k, v)
	}
	_ = mw.Close()
	req, err := http.NewRequest("POST", e.base+path, &buf)
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	res, err := e.http.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(res.Body)
	return page{status: res.StatusCode, header: res.Header, body: b.String()}
}

// Issue 28 item 3: a multipart body without a form token no longer slips
// past the CSRF check. Only the attachment upload route takes multipart
// (and checks the token inside it); every other UI POST refuses it.
func TestMultipartPostNeedsFormToken(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, dbURL string) {
		e := startLocal(t, dbURL)
		f := e.seed("Acme")
		before := len(e.api.List("/api/companies"))
		if p := e.multipartPost("/companies", map[string]string{"name": "pwned"}); p.status != http.StatusUnsupportedMediaType {
			t.Errorf("multipart company create: %d", p.status)
		}
		if p := e.multipartPost("/c/"+f.company+"/tasks", map[string]string{"title": "pwned task"}); p.status != http.StatusUnsupportedMediaType {
			t.Errorf("multipart task create: %d", p.status)
		}
		// Even with a valid token, multipart is only for uploads.
		tok := e.csrf("/")
		if p := e.multipartPost("/companies", map[string]string{"name": "pwned", "csrf": tok}); p.status != http.StatusUnsupportedMediaType {
			t.Errorf("multipart company create with token: %d", p.status)
		}
		if n := len(e.api.List("/api/companies")); n != before {
			t.Fatalf("companies: %d, want %d", n, before)
		}
		for _, is := range e.api.List("/api/companies/" + f.company + "/issues") {
			if strings.Contains(is["title"].(string), "pwned") {
				t.Fatalf("a task was created by a multipart post without a token: %v", is)
			}
		}
		// The upload route still refuses a multipart body without the token.
		if p := e.multipartPost("/c/"+f.company+"/tasks/"+f.task+"/attachments", map[string]string{"x": "y"}); p.status != http.StatusForbidden {
			t.Errorf("upload without token: %d", p.status)
		}
	})
}

// Issue 28 item 7: behind a trusted proxy (PAPERCLIP_TRUSTED_PROXIES) the
// client address comes from X-Forwarded-For, so one stranger's failures
// do not slow everyone behind the proxy; IPv6 clients are counted per /64.
func TestLoginThrottleCountsTheClientBehindATrustedProxy(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, dbURL string) {
		cfg := testkit.Config(t, dbURL)
		cfg.DeploymentMode = config.ModeAuthenticated
		cfg.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
		e := startConfig(t, cfg)
		admin, _ := e.boardUser("admin@example.com", "", "", true)
		tok := e.csrf("/login")
		login := func(key, client string) int {
			return e.do("POST", "/login", url.Values{"key": {key}, "csrf": {tok}}, map[string]string{"X-Forwarded-For": client}).status
		}
		for i := 0; i < 10; i++ {
			if st := login("pcb_wrong", "203.0.113.5"); st != http.StatusUnauthorized {
				t.Fatalf("failure %d: %d", i, st)
			}
		}
		if st := login("pcb_wrong", "203.0.113.5"); st != http.StatusTooManyRequests {
			t.Fatalf("11th failure of the same client: %d", st)
		}
		// Another visitor behind the same proxy is not slowed; a client
		// that writes its own X-Forwarded-For before the proxy's entry
		// does not escape (the right-most untrusted hop counts).
		if st := login("pcb_wrong", "203.0.113.6"); st != http.StatusUnauthorized {
			t.Fatalf("another client behind the proxy: %d", st)
		}
		if st := login("pcb_wrong", "198.51.100.1, 203.0.113.5"); st != http.StatusTooManyRequests {
			t.Fatalf("spoofed left-most hop: %d", st)
		}
		// IPv6: one /64 is one client.
		for i := 1; i <= 10; i++ {
			login("pcb_wrong", fmt.Sprintf("2001:db8:1:1::%x", i))
		}
		if st := login("pcb_wrong", "2001:db8:1:1::ffff"); st != http.StatusTooManyRequests {
			t.Fatalf("another address of the same /64: %d", st)
		}
		if st := login("pcb_wrong", "2001:db8:1:2::1"); st != http.StatusUnauthorized {
			t.Fatalf("another /64: %d", st)
		}
		// The throttled client's valid key signs in.
		if st := login(admin, "203.0.113.5"); st != http.StatusSeeOther {
			t.Fatalf("valid key of the throttled client: %d", st)
		}
	})
}

// Issue 28 item 12: the sign-in form's token is bound to the browser (a
// cookie the sign-in page sets), not the constant "login": a token taken
// from one browser does not sign another browser in (login CSRF).
func TestLoginFormTokenIsBoundToTheBrowser(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, dbURL string) {
		e, admin, _ := startAuth(t, dbURL)
		attackerTok := e.csrf("/login")
		// The victim's browser: its own cookies.
		jar, _ := cookiejar.New(nil)
		victim := &env{t: t, inst: e.inst, base: e.base, api: e.api,
			http: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
		// Without any cookie (a cross-site form post to a first-time visitor).
		if p := victim.do("POST", "/login", url.Values{"key": {admin}, "csrf": {attackerTok}}, nil); p.status != http.StatusForbidden {
			t.Fatalf("attacker's token without the cookie: %d", p.status)
		}
		// With the victim's own cookie.
		victimTok := victim.csrf("/login")
		if victimTok == attackerTok {
			t.Fatal("two browsers got the same sign-in token")
		}
		if p := victim.do("POST", "/login", url.Values{"key": {admin}, "csrf": {attackerTok}}, nil); p.status != http.StatusForbidden {
			t.Fatalf("attacker's token in the victim's browser: %d", p.status)
		}
		if p := victim.do("POST", "/login", url.Values{"key": {admin}, "csrf": {victimTok}}, nil); p.status != http.StatusSeeOther {
			t.Fatalf("the browser's own token: %d %s", p.status, p.body)
		}
	})
}

// Issue 28 item 10: a sender's Unicode format characters (a right-to-left
// override making "invoice\u202efdp.exe" read "invoiceexe.pdf", isolates
// that reorder a display name) are removed from attachment file names and
// shown as visible escapes in sender names, subjects and task titles:
// no page applies one.
func TestFormatCharactersAreNeverApplied(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, dbURL string) {
		m := startMailUI(t, dbURL)
		subject := "Payment \u202eoverdue\u202c notice"
		_, err := m.em.Deliver("help@agentmail.to", emulator.DeliverRequest{From: "\"Bank\u2066 Support\u2069\" <mallory@example.com>",
			Subject: subject, Text: "See the invoice.",
			Attachments: []emulator.DeliverAttachment{{Filename: "invoice\u202efdp.exe", ContentType: "application/pdf",
				ContentBase64: base64.StdEncoding.EncodeToString([]byte("%PDF-1.4 not really"))}}})
		if err != nil {
			t.Fatal(err)
		}
		task := m.task(t, subject)
		testkit.Eventually(t, 30*time.Second, "the email and its attachment on the task", func() bool {
			msgs, _ := m.thread(t, task)["messages"].([]any)
			return len(msgs) == 1 && len(msgs[0].(map[string]any)["attachmentIds"].([]any)) == 1
		})
		atts := m.board.List("/api/issues/" + task + "/attachments")
		if len(atts) != 1 || atts[0]["filename"] != "invoicefdp.exe" {
			t.Fatalf("attachment name: %v", atts)
		}
		for _, path := range []string{"/c/" + m.cid + "/tasks/" + task, "/c/" + m.cid + "/tasks", "/c/" + m.cid, "/c/" + m.cid + "/apps/agentmail/inboxes/" + m.eid + "/conversations"} {
			p := m.admin.get(path)
			if p.status != 200 {
				t.Fatalf("%s: %d", path, p.status)
			}
			if i := strings.IndexFunc(p.body, safetext.IsFormat); i >= 0 {
				t.Errorf("%s applies a format character: …%s…", path, p.body[max(0, i-60):min(len(p.body), i+60)])
			}
		}
		page := m.admin.get("/c/" + m.cid + "/tasks/" + task).body
		for _, want := range []string{"Payment &lt;U&#43;202E&gt;overdue&lt;U&#43;202C&gt; notice", "Bank&lt;U&#43;2066&gt; Support&lt;U&#43;2069&gt;", "invoicefdp.exe"} {
			if !strings.Contains(page, want) {
				t.Errorf("task page lacks the visible escape %q", want)
			}
		}
	})
}
