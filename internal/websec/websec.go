// Package websec guards the HTTP surface against hostile web pages and slow
// clients. Guard.Wrap goes around the whole server mux: it refuses Host
// names a DNS-rebinding page could use (in local_trusted mode), refuses
// cross-origin browser writes, bounds how long a request body may take to
// arrive and sets baseline security headers. API wraps the JSON API subtree:
// request bodies must be JSON (multipart only on upload routes), cross-site
// browser reads are refused and responses can never render as a page.
//
// The package is a leaf: it knows nothing of the API's types, so every
// surface mounted on the server mux (the API, /mcp, a web UI) can use it.
package websec

import (
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Options configure a Guard.
type Options struct {
	// LocalOnly accepts only loopback IP literals, "localhost" and the
	// hosts of TrustedOrigins as the request's Host (local_trusted mode,
	// where a request from loopback acts as the instance administrator),
	// and refuses requests that came through a reverse proxy (see
	// ProxyHeader) unless they name a trusted origin's host, under which
	// no request is the local board.
	LocalOnly bool
	// TrustedOrigins are extra browser origins ("https://host[:port]",
	// such as the public URL) whose cross-origin requests are accepted.
	TrustedOrigins []string
	// BodyReadTimeout bounds the time from the end of the request headers
	// until the body has arrived; zero means no bound.
	BodyReadTimeout time.Duration
}

// Guard is the server-wide request guard.
type Guard struct {
	opts         Options
	cop          *http.CrossOriginProtection
	trustedHosts map[string]bool
}

// New returns a Guard; a malformed trusted origin is an error.
func New(o Options) (*Guard, error) {
	g := &Guard{opts: o, cop: http.NewCrossOriginProtection(), trustedHosts: map[string]bool{}}
	for _, origin := range o.TrustedOrigins {
		if err := g.cop.AddTrustedOrigin(origin); err != nil {
			return nil, fmt.Errorf("websec: trusted origin %q: %w", origin, err)
		}
		u, err := url.Parse(origin)
		if err != nil || u.Host == "" {
			return nil, fmt.Errorf("websec: trusted origin %q has no host", origin)
		}
		g.trustedHosts[strings.ToLower(u.Host)] = true
	}
	return g, nil
}

// Wrap returns h behind the guard: Host check (LocalOnly), cross-origin
// refusal of unsafe methods, the body read deadline and baseline headers.
func (g *Guard) Wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Content-Type-Options", "nosniff")
		if g.opts.LocalOnly && !IsLocalHost(r.Host) && !g.trustedHosts[strings.ToLower(r.Host)] {
			// A DNS-rebinding page reaches a loopback server under its own
			// name; the browser then sends that name as Host.
			WriteError(w, http.StatusForbidden, fmt.Sprintf("host %q is not allowed: a local_trusted server answers only to localhost and loopback addresses", truncate(r.Host, 100)))
			return
		}
		if g.opts.LocalOnly && !g.trustedHosts[strings.ToLower(r.Host)] {
			if h := ProxyHeader(r); h != "" {
				// A reverse proxy on this machine makes every visitor a
				// loopback peer naming localhost: the local board.
				WriteError(w, http.StatusForbidden, fmt.Sprintf("request came through a proxy (it carries %s): a local_trusted server treats every local request as the instance administrator, so it refuses proxied requests; behind a reverse proxy run the server in authenticated mode (PAPERCLIP_DEPLOYMENT_MODE=authenticated)", h))
				return
			}
		}
		if err := g.CheckOrigin(r); err != nil {
			WriteError(w, http.StatusForbidden, err.Error())
			return
		}
		g.limitBody(w, r)
		h.ServeHTTP(w, r)
	})
}

// proxyHeaders are the request headers a reverse proxy adds.
var proxyHeaders = []string{"Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Real-IP"}

// ProxyHeader returns the name of the first reverse-proxy header
// (Forwarded, X-Forwarded-For, X-Forwarded-Host, X-Real-IP) the request
// carries, or "" when it carries none.
func ProxyHeader(r *http.Request) string {
	for _, h := range proxyHeaders {
		if len(r.Header.Values(h)) > 0 {
			return h
		}
	}
	return ""
}

// CheckOrigin reports why a browser request with an unsafe method is
// cross-origin (nil when it is same-origin, from a trusted origin, or not
// from a browser at all: requests without Sec-Fetch-Site and Origin pass).
func (g *Guard) CheckOrigin(r *http.Request) error {
	if err := g.cop.Check(r); err != nil {
		return errors.New("cross-origin request refused: this server does not accept writes from other web origins")
	}
	return nil
}

// limitBody sets a read deadline for the body on the connection. The
// server lifts it itself when the body has been read (it then starts a
// background read that notices the peer going away), so the deadline
// bounds the upload and never the handler's own work.
func (g *Guard) limitBody(w http.ResponseWriter, r *http.Request) {
	if g.opts.BodyReadTimeout <= 0 || r.Body == nil || r.Body == http.NoBody {
		// Why not for bodiless requests: their background read has
		// already started, and a deadline would end it with a timeout,
		// which cancels the request's context mid-handler.
		return
	}
	// A read past the deadline fails with an error wrapping
	// os.ErrDeadlineExceeded; decoders answer it with 408.
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(g.opts.BodyReadTimeout))
}

// APIOptions configure API.
type APIOptions struct {
	// Multipart lists ServeMux patterns ("POST /api/issues/{issueId}/attachments")
	// whose requests may carry multipart/form-data bodies (uploads).
	Multipart []string
}

// API wraps a JSON API subtree: a request body must be application/json
// (or multipart/form-data on the Multipart routes), cross-site browser
// requests (other than top-level navigations and requests from a trusted
// origin) are refused even for safe methods, and responses carry headers
// that stop them rendering or being embedded as a page.
func (g *Guard) API(h http.Handler, o APIOptions) http.Handler {
	uploads := http.NewServeMux()
	for _, p := range o.Multipart {
		uploads.HandleFunc(p, func(http.ResponseWriter, *http.Request) {})
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'; sandbox")
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("Referrer-Policy", "no-referrer")
		hd.Set("Cross-Origin-Resource-Policy", "same-origin")
		if crossSite(r) && !g.trustedOrigin(r.Header.Get("Origin")) {
			WriteError(w, http.StatusForbidden, "cross-site request refused: the API does not serve other web origins")
			return
		}
		if hasBody(r) {
			mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
			_, pattern := uploads.Handler(r)
			switch {
			case mt == "application/json":
			case mt == "multipart/form-data" && pattern != "":
			case pattern != "":
				WriteError(w, http.StatusUnsupportedMediaType, "request body must be multipart/form-data (a file upload)")
				return
			default:
				WriteError(w, http.StatusUnsupportedMediaType, "request body must be JSON: send Content-Type: application/json")
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}

// crossSite reports a browser request from another site (by Fetch
// Metadata) that is not a top-level navigation; old browsers without
// Sec-Fetch-Site are left to the cross-origin write check.
func crossSite(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "cross-site", "same-site":
		return r.Header.Get("Sec-Fetch-Mode") != "navigate" || (r.Method != http.MethodGet && r.Method != http.MethodHead)
	}
	return false
}

// trustedOrigin reports whether origin is one of the trusted origins.
func (g *Guard) trustedOrigin(origin string) bool {
	return origin != "" && slices.Contains(g.opts.TrustedOrigins, origin)
}

// hasBody reports whether the request announces a body (a length or
// chunked transfer).
func hasBody(r *http.Request) bool {
	return r.ContentLength > 0 || (r.ContentLength < 0 && r.Body != nil && r.Body != http.NoBody)
}

// IsLocalHost reports whether a Host header value names this machine in a
// way no DNS name controlled by someone else can: a loopback IP literal or
// "localhost", with an optional port.
func IsLocalHost(host string) bool {
	h := host
	if sh, _, err := net.SplitHostPort(host); err == nil {
		h = sh
	}
	h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// WriteError writes the API's error shape, {"error": msg}, with status.
func WriteError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
