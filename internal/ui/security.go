package ui

import (
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"strings"
)

// contentSecurityPolicy allows only this origin's own script, style, images
// and fetches: no inline code, no remote resource, no framing. Fragment
// swaps go through the single Trusted Types policy "paperclip" in app.js.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"font-src 'self'; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'; " +
	"manifest-src 'self'; require-trusted-types-for 'script'; trusted-types paperclip"

// setSecurityHeaders sets the headers every UI response carries.
func setSecurityHeaders(h http.Header) {
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	h.Set("Permissions-Policy", "camera=(), microphone=(), geolocation=(), payment=()")
}

// keys are the UI's secrets, derived from the vault master key with HKDF so
// that every replica computes the same values without storing them.
type keys struct {
	csrf  []byte
	flash []byte
}

func deriveKeys(master []byte) (keys, error) {
	if len(master) < 16 {
		return keys{}, errors.New("ui: master key is missing")
	}
	var k keys
	var err error
	if k.csrf, err = hkdf.Key(sha256.New, master, nil, "paperclip-ui-csrf-v1", 32); err != nil {
		return k, err
	}
	if k.flash, err = hkdf.Key(sha256.New, master, nil, "paperclip-ui-flash-v1", 32); err != nil {
		return k, err
	}
	return k, nil
}

func mac(key []byte, msg string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(msg))
	return m.Sum(nil)
}

// csrfToken is the synchronizer token of a form: bound to the board session
// in authenticated mode, to the local board in local_trusted mode, and to
// "login" on the sign-in form. It needs no storage.
func (u *UI) csrfToken(binding string) string {
	return base64.RawURLEncoding.EncodeToString(mac(u.keys.csrf, binding))
}

// validCSRF compares the request's token (form field or X-CSRF-Token header)
// with the expected one in constant time.
func (u *UI) validCSRF(r *http.Request, binding string) bool {
	got := r.Header.Get("X-CSRF-Token")
	if got == "" {
		got = r.PostFormValue("csrf")
	}
	want := u.csrfToken(binding)
	return got != "" && hmac.Equal([]byte(got), []byte(want))
}

// safeNext returns p when it is a path inside this UI (an absolute path,
// not protocol-relative, no backslash, no scheme or host, no control
// character), else "/". It guards every redirect target and back link
// taken from a request (open-redirect defence). Control characters count
// because browsers drop tabs and newlines anywhere in a URL: "/\t/evil"
// would otherwise become "//evil", another host.
func safeNext(p string) string {
	if p == "" || !strings.HasPrefix(p, "/") || strings.HasPrefix(p, "//") || strings.ContainsRune(p, '\\') {
		return "/"
	}
	for _, r := range p {
		if r < 0x20 || r == 0x7f || r == ' ' {
			return "/"
		}
	}
	if u, err := url.Parse(p); err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" {
		return "/"
	}
	if strings.HasPrefix(p, "/api/") || strings.HasPrefix(p, "/static/") {
		return "/"
	}
	return p
}
