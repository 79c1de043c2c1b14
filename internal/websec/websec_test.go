package websec_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/websec"
)

// serve starts a real HTTP server on loopback: the guard around a mux whose
// /api/ subtree is behind API, with an upload route and a route that reads
// the body and then works for hold before answering.
func serve(t *testing.T, o websec.Options, hold time.Duration) *httptest.Server {
	t.Helper()
	g, err := websec.New(o)
	if err != nil {
		t.Fatal(err)
	}
	api := http.NewServeMux()
	api.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); errors.Is(err, os.ErrDeadlineExceeded) {
			http.Error(w, err.Error(), http.StatusRequestTimeout)
			return
		} else if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		select {
		case <-time.After(hold):
		case <-r.Context().Done():
			http.Error(w, "context cancelled while working", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprint(w, "ok")
	})
	mux := http.NewServeMux()
	mux.Handle("/api/", g.API(api, websec.APIOptions{Multipart: []string{"POST /api/uploads/{id}"}}))
	mux.HandleFunc("/page", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "page") })
	srv := httptest.NewServer(g.Wrap(mux))
	t.Cleanup(srv.Close)
	return srv
}

func do(t *testing.T, srv *httptest.Server, method, path, host string, headers map[string]string, body string) (*http.Response, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, srv.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp, string(out)
}

func TestLocalOnlyHost(t *testing.T) {
	srv := serve(t, websec.Options{LocalOnly: true, TrustedOrigins: []string{"https://pc.example.com"}}, 0)
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	for host, want := range map[string]int{
		"":                                       200, // the literal 127.0.0.1:port
		fmt.Sprintf("localhost:%d", port):        200,
		"LOCALHOST":                              200,
		fmt.Sprintf("[::1]:%d", port):            200,
		"127.0.0.2":                              200,
		"pc.example.com":                         200, // the public URL's host (webhooks through a tunnel)
		"attacker.example":                       403,
		fmt.Sprintf("attacker.example:%d", port): 403,
		"localhost.attacker.example":             403,
		"127.0.0.1.nip.io":                       403,
	} {
		resp, body := do(t, srv, "GET", "/page", host, nil, "")
		if resp.StatusCode != want {
			t.Errorf("Host %q: %d %s, want %d", host, resp.StatusCode, body, want)
		}
		if want == 403 && !strings.Contains(body, "not allowed") {
			t.Errorf("Host %q: unclear refusal %s", host, body)
		}
	}
	// Without LocalOnly (authenticated mode) any Host is served.
	open := serve(t, websec.Options{}, 0)
	if resp, body := do(t, open, "GET", "/page", "pc.example.org", nil, ""); resp.StatusCode != 200 {
		t.Fatalf("authenticated mode Host: %d %s", resp.StatusCode, body)
	}
}

func TestIsLocalHost(t *testing.T) {
	for h, want := range map[string]bool{"localhost": true, "localhost:1": true, "127.0.0.1": true, "[::1]:80": true, "::1": true,
		"localhost.": false, "a.localhost": false, "10.0.0.1": false, "": false, "0.0.0.0": false} {
		if got := websec.IsLocalHost(h); got != want {
			t.Errorf("IsLocalHost(%q) = %v", h, got)
		}
	}
}

func TestCrossOriginWritesRefused(t *testing.T) {
	srv := serve(t, websec.Options{LocalOnly: true, TrustedOrigins: []string{"https://pc.example.com"}}, 0)
	json := map[string]string{"Content-Type": "application/json"}
	with := func(extra map[string]string) map[string]string {
		out := map[string]string{"Content-Type": "application/json"}
		for k, v := range extra {
			out[k] = v
		}
		return out
	}
	cases := []struct {
		name    string
		method  string
		path    string
		headers map[string]string
		body    string
		want    int
	}{
		{"curl without Origin", "POST", "/api/companies", json, `{}`, 200},
		{"cross-site form post", "POST", "/api/companies", map[string]string{"Content-Type": "text/plain", "Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}, `{}`, 403},
		{"cross-site JSON post", "POST", "/api/companies", with(map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}), `{}`, 403},
		{"old browser: Origin only", "POST", "/api/companies", with(map[string]string{"Origin": "https://evil.example"}), `{}`, 403},
		{"same-site other port", "DELETE", "/api/x", with(map[string]string{"Origin": "http://localhost:9999", "Sec-Fetch-Site": "same-site"}), "", 403},
		{"same origin", "POST", "/api/companies", with(map[string]string{"Sec-Fetch-Site": "same-origin"}), `{}`, 200},
		{"trusted origin", "POST", "/api/companies", with(map[string]string{"Origin": "https://pc.example.com", "Sec-Fetch-Site": "cross-site"}), `{}`, 200},
		{"cross-site page write outside the API", "POST", "/page", map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}, "x", 403},
		{"cross-site read of the API", "GET", "/api/companies", map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors"}, "", 403},
		{"cross-site navigation to the API", "GET", "/api/health", map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate"}, "", 200},
		{"cross-site navigation to a page", "GET", "/page", map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate"}, "", 200},
	}
	for _, c := range cases {
		resp, body := do(t, srv, c.method, c.path, "", c.headers, c.body)
		if resp.StatusCode != c.want {
			t.Errorf("%s: %d %s, want %d", c.name, resp.StatusCode, body, c.want)
		}
	}
}

func TestAPIBodiesMustBeJSON(t *testing.T) {
	srv := serve(t, websec.Options{}, 0)
	cases := []struct {
		name, method, path, ctype, body string
		want                            int
	}{
		{"json", "POST", "/api/companies", "application/json", `{}`, 200},
		{"json with charset", "PATCH", "/api/companies", "application/json; charset=utf-8", `{}`, 200},
		{"text/plain (a simple cross-site request type)", "POST", "/api/companies", "text/plain", `{}`, 415},
		{"form (curl -d)", "POST", "/api/companies", "application/x-www-form-urlencoded", `{}`, 415},
		{"no type", "POST", "/api/companies", "", `{}`, 415},
		{"multipart outside uploads", "POST", "/api/companies", "multipart/form-data; boundary=x", "--x--", 415},
		{"multipart upload", "POST", "/api/uploads/1", "multipart/form-data; boundary=x", "--x--", 200},
		{"json to an upload route", "POST", "/api/uploads/1", "application/json", "{}", 200},
		{"text to an upload route", "POST", "/api/uploads/1", "text/plain", "x", 415},
		{"no body, no type", "POST", "/api/companies", "", "", 200},
	}
	for _, c := range cases {
		h := map[string]string{}
		if c.ctype != "" {
			h["Content-Type"] = c.ctype
		}
		resp, body := do(t, srv, c.method, c.path, "", h, c.body)
		if resp.StatusCode != c.want {
			t.Errorf("%s: %d %s, want %d", c.name, resp.StatusCode, body, c.want)
		}
		if c.want == 415 && !strings.Contains(body, "Content-Type: application/json") && !strings.Contains(body, "multipart") {
			t.Errorf("%s: unclear 415 message %s", c.name, body)
		}
	}
}

func TestSecurityHeaders(t *testing.T) {
	srv := serve(t, websec.Options{}, 0)
	resp, _ := do(t, srv, "GET", "/api/health", "", nil, "")
	for k, want := range map[string]string{
		"X-Content-Type-Options":       "nosniff",
		"X-Frame-Options":              "DENY",
		"Referrer-Policy":              "no-referrer",
		"Cross-Origin-Resource-Policy": "same-origin",
	} {
		if got := resp.Header.Get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "frame-ancestors 'none'") {
		t.Errorf("CSP %q", csp)
	}
	page, _ := do(t, srv, "GET", "/page", "", nil, "")
	if page.Header.Get("X-Content-Type-Options") != "nosniff" || page.Header.Get("Content-Security-Policy") != "" {
		t.Errorf("page headers: %v (the API's CSP is for the API only)", page.Header)
	}
}

// A client that sends its headers and then trickles (or stalls) the body
// is cut off at the body read deadline instead of holding a connection.
func TestSlowBodyCutOff(t *testing.T) {
	srv := serve(t, websec.Options{BodyReadTimeout: 300 * time.Millisecond}, 0)
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /api/companies HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"na")
	// The server must answer (408) and close well before this generous
	// bound; without a deadline it would wait for the body forever.
	_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to a stalled body: %v", err)
	}
	if resp.StatusCode != http.StatusRequestTimeout {
		t.Fatalf("stalled body: status %d", resp.StatusCode)
	}
}

// The deadline bounds the upload only: a handler that has read its body
// may work longer than the deadline without its context being cancelled.
func TestBodyDeadlineSparesTheHandler(t *testing.T) {
	srv := serve(t, websec.Options{BodyReadTimeout: 200 * time.Millisecond}, 600*time.Millisecond)
	resp, body := do(t, srv, "POST", "/api/companies", "", map[string]string{"Content-Type": "application/json"}, `{"name":"x"}`)
	if resp.StatusCode != 200 || body != "ok" {
		t.Fatalf("handler outlived the body deadline: %d %s", resp.StatusCode, body)
	}
	// A bodiless request is not given a deadline at all.
	resp, body = do(t, srv, "GET", "/api/companies", "", nil, "")
	if resp.StatusCode != 200 {
		t.Fatalf("GET: %d %s", resp.StatusCode, body)
	}
}
