package server_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// Issue 28 item 6: a reverse proxy on the machine of a local_trusted
// server makes every visitor a loopback peer; before, each became the
// instance administrator. A proxied request (any of the proxy headers) is
// refused with a 403 that names the header and points to authenticated
// mode; the same request without a proxy is still the local board.
func TestLocalTrustedRefusesProxiedRequests(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, dbURL string) {
		cfg := testkit.Config(t, dbURL)
		cfg.PublicURL = "https://pc.example.com"
		inst := testkit.Start(t, cfg)
		base := inst.URL()
		target, _ := url.Parse(base)
		// A real reverse proxy, as nginx or Caddy would be: it forwards to
		// the loopback port under the Host "localhost" and adds
		// X-Forwarded-For.
		rp := httputil.NewSingleHostReverseProxy(target)
		dir := rp.Director
		rp.Director = func(r *http.Request) { dir(r); r.Host = "localhost" }
		proxy := httptest.NewServer(rp)
		t.Cleanup(proxy.Close)

		res, err := http.Post(proxy.URL+"/api/companies", "application/json", strings.NewReader(`{"name":"stranger's company"}`))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "X-Forwarded-For") || !strings.Contains(string(body), "authenticated") {
			t.Fatalf("proxied admin request: %d %s", res.StatusCode, body)
		}
		for _, h := range []string{"Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Real-IP"} {
			for _, path := range []string{"/api/companies", "/", "/mcp"} {
				st, body := rawRequest(t, base, "GET", path, "", map[string]string{h: "for=203.0.113.9"}, "")
				if st != http.StatusForbidden || !strings.Contains(body, h) {
					t.Errorf("%s with %s: %d %.200s", path, h, st, body)
				}
			}
		}
		board := testkit.NewClient(t, base)
		if n := len(board.List("/api/companies")); n != 0 {
			t.Fatalf("the proxied request created %d companies", n)
		}
		// Without a proxy the loopback caller is still the local board, and
		// the public URL's host (webhooks through a tunnel, never the
		// local board) is still served, asking for a key.
		board.JSON("POST", "/api/companies", map[string]any{"name": "local"}, 201)
		if st, body := rawRequest(t, base, "GET", "/api/companies", "pc.example.com", map[string]string{"X-Forwarded-For": "203.0.113.9"}, ""); st != 401 {
			t.Fatalf("public host through a tunnel: %d %s", st, body)
		}
	})
}
