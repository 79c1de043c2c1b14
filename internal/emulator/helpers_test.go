package emulator

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-smtp"
)

// startTest starts an emulator for one test and returns it with an
// organization key. Receipts are immediate unless the test changes it.
func startTest(t testing.TB, opts Options) (*Server, string) {
	t.Helper()
	if opts.DeliveryDelay == 0 {
		opts.DeliveryDelay = time.Millisecond
	}
	s, err := Start(context.Background(), opts)
	if err != nil {
		t.Fatalf("start emulator: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close emulator: %v", err)
		}
	})
	_, key := s.CreateOrganization("test")
	return s, key
}

// apiResp is a decoded provider response.
type apiResp struct {
	status int
	header http.Header
	raw    []byte
	body   map[string]any
}

func (r apiResp) str(key string) string {
	v, _ := r.body[key].(string)
	return v
}

func (r apiResp) list(key string) []any {
	v, _ := r.body[key].([]any)
	return v
}

// doAPI performs one REST request against the emulator. path is relative
// to /v0 and must already be escaped.
func doAPI(t testing.TB, s *Server, key, method, path string, body any, headers ...string) apiResp {
	t.Helper()
	var rd io.Reader
	if body != nil {
		switch b := body.(type) {
		case string:
			rd = strings.NewReader(b)
		default:
			enc, err := json.Marshal(body)
			if err != nil {
				t.Fatalf("encode body: %v", err)
			}
			rd = bytes.NewReader(enc)
		}
	}
	req, err := http.NewRequest(method, s.APIURL()+path, rd)
	if err != nil {
		t.Fatalf("build request: %v", err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header[http.CanonicalHeaderKey(headers[i])] = []string{headers[i+1]}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read %s %s: %v", method, path, err)
	}
	out := apiResp{status: resp.StatusCode, header: resp.Header, raw: raw}
	if len(raw) > 0 && raw[0] == '{' {
		if err := json.Unmarshal(raw, &out.body); err != nil {
			t.Fatalf("decode %s %s: %v: %s", method, path, err, raw)
		}
	}
	return out
}

// mustCall is doAPI that fails the test unless the status is want.
func mustCall(t testing.TB, s *Server, key, method, path string, body any, want int, headers ...string) apiResp {
	t.Helper()
	r := doAPI(t, s, key, method, path, body, headers...)
	if r.status != want {
		t.Fatalf("%s %s: status %d, want %d: %s", method, path, r.status, want, r.raw)
	}
	return r
}

// control performs one control API request.
func control(t testing.TB, s *Server, method, path string, body any) apiResp {
	t.Helper()
	var rd io.Reader
	if body != nil {
		enc, _ := json.Marshal(body)
		rd = bytes.NewReader(enc)
	}
	req, _ := http.NewRequest(method, s.URL()+path, rd)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	out := apiResp{status: resp.StatusCode, header: resp.Header, raw: raw}
	if len(raw) > 0 && raw[0] == '{' {
		_ = json.Unmarshal(raw, &out.body)
	}
	return out
}

func esc(s string) string { return url.PathEscape(s) }

func createInbox(t testing.TB, s *Server, key, username string) string {
	t.Helper()
	r := mustCall(t, s, key, "POST", "/inboxes", map[string]any{"username": username}, 200)
	return r.str("inbox_id")
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func hasString(list []any, want string) bool {
	for _, v := range list {
		if s, _ := v.(string); s == want {
			return true
		}
	}
	return false
}

// sendSMTP submits raw over plain SMTP (the emulator offers no STARTTLS).
func sendSMTP(addr, from string, to []string, raw string) error {
	c, err := smtp.Dial(addr)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.Hello("test.local"); err != nil {
		return err
	}
	if err := c.Mail(from, nil); err != nil {
		return err
	}
	for _, r := range to {
		if err := c.Rcpt(r, nil); err != nil {
			return err
		}
	}
	w, err := c.Data()
	if err != nil {
		return err
	}
	if _, err := io.WriteString(w, raw); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	return c.Quit()
}
