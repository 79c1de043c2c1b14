package agentmail

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestProviderCodeFromBody(t *testing.T) {
	t.Parallel()
	for _, code := range ProviderCodes() {
		body := fmt.Sprintf(`{"name":"X","code":%q,"message":"m"}`, code)
		if got := providerCodeFromBody([]byte(body)); got != code {
			t.Errorf("allowlisted %q: got %q", code, got)
		}
	}
	if n := len(ProviderCodes()); n != 24 {
		t.Fatalf("allowlist has %d codes, want 24", n)
	}
	cases := map[string]string{
		"plain text":             `Forbidden`,
		"non-allowlisted code":   `{"code":"totally_new_code"}`,
		"array code":             `{"code":["not_found"]}`,
		"top-level array":        `[{"code":"not_found"}]`,
		"no code":                `{"name":"ForbiddenError","message":"Forbidden"}`,
		"null":                   `null`,
		"null code":              `{"code":null}`,
		"number code":            `{"code":404}`,
		"object code":            `{"code":{"code":"not_found"}}`,
		"nested code":            `{"error":{"code":"not_found"}}`,
		"wrong key case":         `{"CODE":"not_found"}`,
		"code with spaces":       `{"code":" not_found"}`,
		"upper-case code":        `{"code":"NOT_FOUND"}`,
		"truncated JSON":         `{"code":"not_found"`,
		"trailing garbage":       `{"code":"not_found"} x`,
		"empty":                  ``,
		"string top-level":       `"not_found"`,
		"escaped code mismatch":  `{"code":"not\u005ffound\u0000"}`,
		"two objects":            `{"code":"not_found"}{"code":"conflict"}`,
		"whitespace only":        "  \n",
		"last duplicate invalid": `{"code":"not_found","code":"nope"}`,
	}
	for name, body := range cases {
		if got := providerCodeFromBody([]byte(body)); got != CodeUnknown {
			t.Errorf("%s: got %q, want unknown", name, got)
		}
	}
	// Accepted variants: escapes that decode to the exact code, a BOM, and
	// the last of duplicate keys (JSON.parse semantics).
	accepted := map[string]string{
		"unicode escape":  `{"code":"not\u005ffound"}`,
		"bom":             "\ufeff{\"code\":\"conflict\"}",
		"last duplicate":  `{"code":"nope","code":"conflict"}`,
		"surrounding ws":  " \n{\"code\" : \"conflict\"}\n ",
		"with extra data": `{"code":"conflict","fix":"do x","docs":"https://docs.agentmail.to/errors"}`,
	}
	for name, body := range accepted {
		if got := providerCodeFromBody([]byte(body)); got == CodeUnknown {
			t.Errorf("%s: got unknown", name)
		}
	}
}

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		in   string
		want time.Duration
	}{
		{"", time.Second},
		{"9", 9 * time.Second},
		{" 12 ", 12 * time.Second},
		{"0", time.Second},
		{"0.2", time.Second},
		{"1.5", 1500 * time.Millisecond},
		{"300", 300 * time.Second},
		{"301", 300 * time.Second},
		{"99999999999999999999999999", 300 * time.Second},
		{"-5", time.Second},
		{"+5", time.Second},
		{"1e3", time.Second},
		{"0x10", time.Second},
		{"soon", time.Second},
		{now.Add(30 * time.Second).Format(http.TimeFormat), 30 * time.Second},
		{now.Add(-time.Hour).Format(http.TimeFormat), time.Second},
		{now.Add(24 * time.Hour).Format(http.TimeFormat), 300 * time.Second},
		{now.Add(90 * time.Second).Format(time.RFC850), 90 * time.Second},
	}
	for _, c := range cases {
		if got := parseRetryAfter(c.in, now); got != c.want {
			t.Errorf("parseRetryAfter(%q) = %v, want %v", c.in, got, c.want)
		}
	}
}

// TestErrorBodyOversized checks the 8 KiB limit, both
// with a Content-Length and chunked: the code is unknown, the status is
// kept, and the body is closed exactly once.
func TestErrorBodyOversized(t *testing.T) {
	t.Parallel()
	big := `{"code":"missing_permission","pad":"` + strings.Repeat("x", MaxErrorBodyBytes) + `"}`
	for _, chunked := range []bool{false, true} {
		t.Run(fmt.Sprintf("chunked=%v", chunked), func(t *testing.T) {
			t.Parallel()
			srv, rec := newTestServer(t, func(w http.ResponseWriter, r *http.Request, _ <-chan struct{}) {
				if !chunked {
					w.Header().Set("Content-Length", fmt.Sprint(len(big)))
				}
				w.WriteHeader(http.StatusForbidden)
				if chunked {
					// Flush the header first so the response is chunked.
					w.(http.Flusher).Flush()
				}
				_, _ = w.Write([]byte(big))
			})
			cc := &closeCounter{}
			c := newTestClient(t, srv, cc)
			_, err := c.CreateInbox(testContext(t), CreateInboxRequest{Username: "a"})
			pe := asError(t, err)
			if pe.Status != 403 || pe.Code != CodeUnknown || pe.Operation != OpCreateInbox {
				t.Fatalf("got %+v", pe)
			}
			if n := cc.closes.Load(); n != 1 {
				t.Fatalf("body closed %d times, want 1", n)
			}
			if n, _, _, _ := rec.snapshot(); n != 1 {
				t.Fatalf("%d requests, want 1", n)
			}
		})
	}
}

// TestErrorBodyAtLimit: a body of exactly 8 KiB is still inspected.
func TestErrorBodyAtLimit(t *testing.T) {
	t.Parallel()
	prefix := `{"code":"limit_exceeded","pad":"`
	body := prefix + strings.Repeat("x", MaxErrorBodyBytes-len(prefix)-2) + `"}`
	if len(body) != MaxErrorBodyBytes {
		t.Fatalf("test body is %d bytes", len(body))
	}
	srv, _ := newTestServer(t, func(w http.ResponseWriter, r *http.Request, _ <-chan struct{}) {
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write([]byte(body))
	})
	c := newTestClient(t, srv, nil)
	_, err := c.CreateInbox(testContext(t), CreateInboxRequest{})
	if pe := asError(t, err); pe.Code != CodeLimitExceeded {
		t.Fatalf("code %q, want limit_exceeded", pe.Code)
	}
}

// TestErrorBodyStalled: a body that never finishes
// yields unknown once the read timer fires, keeps the status and
// Retry-After, and is closed exactly once even when Close fails.
func TestErrorBodyStalled(t *testing.T) {
	t.Parallel()
	srv, rec := newTestServer(t, func(w http.ResponseWriter, r *http.Request, release <-chan struct{}) {
		w.Header().Set("Retry-After", "7")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"code":"service_unava`))
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	cc := &closeCounter{closeErr: errors.New("cancel rejected")}
	c := newTestClient(t, srv, cc)
	_, err := c.GetInbox(testContext(t), "agent@agentmail.to")
	pe := asError(t, err)
	if pe.Status != 503 || pe.Code != CodeUnknown || pe.Operation != OpGetInbox || pe.RetryAfter != 7*time.Second {
		t.Fatalf("got %+v", pe)
	}
	if n := cc.closes.Load(); n != 1 {
		t.Fatalf("body closed %d times, want 1", n)
	}
	if n, _, _, _ := rec.snapshot(); n != 1 {
		t.Fatalf("%d requests, want 1", n)
	}
}

// TestErrorBodyReadError: the connection breaks in the
// middle of a 429 body; Retry-After 9 and the operation survive, with one
// request only.
func TestErrorBodyReadError(t *testing.T) {
	t.Parallel()
	srv, rec := newTestServer(t, func(w http.ResponseWriter, r *http.Request, _ <-chan struct{}) {
		conn, buf, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		fmt.Fprint(buf, "HTTP/1.1 429 Too Many Requests\r\nRetry-After: 9\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n{\"code\":\"rate_li")
		_ = buf.Flush()
	})
	c := newTestClient(t, srv, nil)
	_, err := c.SendMessage(testContext(t), "agent@agentmail.to", SendMessageRequest{To: []string{"x@example.com"}, Text: "hi"}, "pub-1")
	pe := asError(t, err)
	if pe.Status != 429 || pe.Code != CodeUnknown || pe.Operation != OpSendMessage || pe.RetryAfter != 9*time.Second {
		t.Fatalf("got %+v", pe)
	}
	if d, ok := RetryAfter(err); !ok || d != 9*time.Second {
		t.Fatalf("RetryAfter = %v, %v", d, ok)
	}
	if !errors.Is(err, ErrRateLimited) || !IsTransient(err) {
		t.Fatalf("429 must match ErrRateLimited and be transient")
	}
	if n, _, _, _ := rec.snapshot(); n != 1 {
		t.Fatalf("%d requests, want 1 (diagnostics never retry)", n)
	}
}

// TestErrorBodyUnreadable (the Go counterpart of an already-locked body):
// a body whose first read fails keeps status and
// Retry-After, yields unknown, and is still closed once.
func TestErrorBodyUnreadable(t *testing.T) {
	t.Parallel()
	for _, status := range []int{403, 429} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			t.Parallel()
			srv, _ := newTestServer(t, func(w http.ResponseWriter, r *http.Request, _ <-chan struct{}) {
				w.Header().Set("Retry-After", "4")
				w.WriteHeader(status)
				_, _ = w.Write([]byte(`{"code":"missing_permission"}`))
			})
			cc := &closeCounter{breakBody: true, closeErr: errors.New("cancel failed")}
			c := newTestClient(t, srv, cc)
			_, err := c.ListInboxes(testContext(t), ListParams{Limit: 100})
			pe := asError(t, err)
			if pe.Status != status || pe.Code != CodeUnknown || pe.RetryAfter != 4*time.Second || pe.Operation != OpListInboxes {
				t.Fatalf("got %+v", pe)
			}
			if n := cc.closes.Load(); n != 1 {
				t.Fatalf("body closed %d times, want 1", n)
			}
		})
	}
}

// TestInspectErrorBodyDirect exercises the inspector on in-memory bodies,
// including a reader that panics.
func TestInspectErrorBodyDirect(t *testing.T) {
	t.Parallel()
	if got := inspectErrorBody(nil, -1); got != CodeUnknown {
		t.Fatalf("nil body: %q", got)
	}
	body := &countingBody{ReadCloser: nopCloser{bufio.NewReader(bytes.NewReader([]byte(`{"code":"conflict"}`)))}, c: &closeCounter{}}
	if got := inspectErrorBody(body, -1); got != CodeConflict {
		t.Fatalf("got %q", got)
	}
	if body.c.closes.Load() != 1 {
		t.Fatalf("not closed once")
	}
	pb := &countingBody{ReadCloser: nopCloser{panicReader{}}, c: &closeCounter{}}
	if got := inspectErrorBody(pb, -1); got != CodeUnknown {
		t.Fatalf("panicking reader: %q", got)
	}
	if pb.c.closes.Load() != 1 {
		t.Fatalf("panicking body not closed once")
	}
	// A declared length over the limit is refused without reading.
	lb := &countingBody{ReadCloser: nopCloser{panicReader{}}, c: &closeCounter{}}
	if got := inspectErrorBody(lb, MaxErrorBodyBytes+1); got != CodeUnknown || lb.c.closes.Load() != 1 {
		t.Fatalf("declared oversize: %q closes=%d", got, lb.c.closes.Load())
	}
}

type nopCloser struct {
	r interface{ Read([]byte) (int, error) }
}

func (n nopCloser) Read(p []byte) (int, error) { return n.r.Read(p) }
func (nopCloser) Close() error                 { return nil }

type panicReader struct{}

func (panicReader) Read([]byte) (int, error) { panic("boom") }

// FuzzProviderCodeFromBody checks that the parser never panics, only ever
// returns an allowlisted code or unknown, and only returns a code that the
// body really carries as its top-level "code" string.
func FuzzProviderCodeFromBody(f *testing.F) {
	for _, s := range []string{
		`{"code":"missing_permission","message":"Forbidden"}`,
		`{"code":["not_found"]}`,
		`[{"code":"not_found"}]`,
		`null`,
		`Forbidden`,
		"\ufeff{\"code\":\"conflict\"}",
		`{"code":"not\u005ffound"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		code := providerCodeFromBody(body)
		if code == CodeUnknown {
			return
		}
		if !IsProviderCode(code) {
			t.Fatalf("returned non-allowlisted %q", code)
		}
		var obj map[string]any
		if err := json.Unmarshal(bytes.TrimPrefix(body, utf8BOM), &obj); err != nil {
			t.Fatalf("accepted a body that does not parse: %v", err)
		}
		if obj["code"] != code {
			t.Fatalf("returned %q but body code is %v", code, obj["code"])
		}
	})
}

// FuzzInspectErrorBody drives the full inspector (size limit, reader,
// close) with arbitrary bodies and declared lengths.
func FuzzInspectErrorBody(f *testing.F) {
	f.Add([]byte(`{"code":"rate_limit_exceeded"}`), int64(-1))
	f.Add([]byte(`{"code":"conflict"}`), int64(MaxErrorBodyBytes+1))
	f.Add(bytes.Repeat([]byte(" "), MaxErrorBodyBytes+1), int64(-1))
	f.Fuzz(func(t *testing.T, body []byte, declared int64) {
		cb := &countingBody{ReadCloser: nopCloser{bytes.NewReader(body)}, c: &closeCounter{}}
		got := inspectErrorBody(cb, declared)
		if n := cb.c.closes.Load(); n != 1 {
			t.Fatalf("closed %d times", n)
		}
		want := providerCodeFromBody(body)
		if len(body) > MaxErrorBodyBytes || declared > MaxErrorBodyBytes {
			want = CodeUnknown
		}
		if got != want {
			t.Fatalf("got %q want %q", got, want)
		}
	})
}
