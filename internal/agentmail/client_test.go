package agentmail

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestDefaultBaseURL covers the pinned production host.
func TestDefaultBaseURL(t *testing.T) {
	t.Parallel()
	c, err := New(Options{APIKey: testKey})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.BaseURL(); got != "https://api.agentmail.to/v0" {
		t.Fatalf("BaseURL = %q", got)
	}
	if c.timeout != 25*time.Second {
		t.Fatalf("timeout = %v", c.timeout)
	}
	if _, err := New(Options{BaseURL: "http://api.agentmail.to/v0"}); !errors.Is(err, ErrInvalidBaseURL) {
		t.Fatalf("plain http to a remote host accepted: %v", err)
	}
}

// TestRequestWireFormat checks, at the byte level, the escaped
// reply path, bearer header, JSON content type and Idempotency-Key.
func TestRequestWireFormat(t *testing.T) {
	t.Parallel()
	srv, rec := newTestServer(t, func(w http.ResponseWriter, r *http.Request, _ <-chan struct{}) {
		_, _ = w.Write([]byte(`{"message_id":"<new@agentmail.to>","thread_id":"thd_1"}`))
	})
	c := newTestClient(t, srv, nil)
	f := false
	out, err := c.ReplyToMessage(testContext(t), "agent@agentmail.to", "<message@domain>",
		ReplyRequest{To: []string{"a@example.com"}, ReplyAll: &f, Text: "hello",
			Headers: map[string]string{"X-Paperclip-Publication-Id": "0b6f1c1e-0000-4000-8000-000000000001"}},
		"0b6f1c1e-0000-4000-8000-000000000001")
	if err != nil {
		t.Fatal(err)
	}
	if out.MessageID != "<new@agentmail.to>" || out.ThreadID != "thd_1" {
		t.Fatalf("out = %+v", out)
	}
	_, req, raw, body := rec.snapshot()
	if raw != "/v0/inboxes/agent%40agentmail.to/messages/%3Cmessage%40domain%3E/reply" {
		t.Fatalf("raw path %q", raw)
	}
	if req.Method != http.MethodPost {
		t.Fatalf("method %s", req.Method)
	}
	if got := req.Header.Get("Authorization"); got != "Bearer "+testKey {
		t.Fatalf("Authorization %q", got)
	}
	if got := req.Header.Get("Content-Type"); got != "application/json" {
		t.Fatalf("Content-Type %q", got)
	}
	if got := req.Header.Get("Idempotency-Key"); got != "0b6f1c1e-0000-4000-8000-000000000001" {
		t.Fatalf("Idempotency-Key %q", got)
	}
	if strings.Contains(req.URL.RawQuery, testKey) {
		t.Fatal("key in query")
	}
	var sent map[string]any
	if err := json.Unmarshal(body, &sent); err != nil {
		t.Fatal(err)
	}
	if sent["reply_all"] != false || sent["text"] != "hello" {
		t.Fatalf("body %s", body)
	}
	if _, ok := sent["subject"]; ok {
		t.Fatalf("reply body must not carry a subject: %s", body)
	}
}

func TestListMessagesQuery(t *testing.T) {
	t.Parallel()
	srv, rec := newTestServer(t, func(w http.ResponseWriter, r *http.Request, _ <-chan struct{}) {
		_, _ = w.Write([]byte(`{"count":1,"next_page_token":"p2","messages":[{"inbox_id":"a@b.c","thread_id":"t","message_id":"<m@x>","labels":["received"],"timestamp":"2026-01-02T03:04:05Z","from":"x@y","to":["a@b.c"],"size":3,"created_at":"2026-01-02T03:04:06.123Z"}]}`))
	})
	c := newTestClient(t, srv, nil)
	after := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	out, err := c.ListMessages(testContext(t), "a@b.c", ListMessagesParams{Limit: 100, Ascending: true, PageToken: "p1", After: after, Labels: []string{"received", "unread"}})
	if err != nil {
		t.Fatal(err)
	}
	if out.NextPageToken != "p2" || len(out.Messages) != 1 || out.Messages[0].MessageID != "<m@x>" || out.Messages[0].CreatedAt.IsZero() {
		t.Fatalf("out = %+v", out)
	}
	_, req, raw, _ := rec.snapshot()
	if raw != "/v0/inboxes/a%40b.c/messages" || req.Method != http.MethodGet {
		t.Fatalf("%s %s", req.Method, raw)
	}
	q := req.URL.Query()
	if q.Get("ascending") != "true" || q.Get("limit") != "100" || q.Get("page_token") != "p1" ||
		q.Get("after") != "2026-01-01T00:00:00Z" || strings.Join(q["labels"], ",") != "received,unread" {
		t.Fatalf("query %v", q)
	}
}

// TestRedirectRefused: a 3xx is reported as a provider error and never
// followed, so the bearer key cannot travel to the Location.
func TestRedirectRefused(t *testing.T) {
	t.Parallel()
	target, targetRec := newTestServer(t, func(w http.ResponseWriter, r *http.Request, _ <-chan struct{}) {
		_, _ = w.Write([]byte(`{}`))
	})
	srv, _ := newTestServer(t, func(w http.ResponseWriter, r *http.Request, _ <-chan struct{}) {
		http.Redirect(w, r, target.URL+"/v0/auth/me", http.StatusFound)
	})
	c := newTestClient(t, srv, nil)
	_, err := c.InspectKey(testContext(t))
	pe := asError(t, err)
	if pe.Status != http.StatusFound || pe.Operation != OpInspectKey {
		t.Fatalf("got %+v", pe)
	}
	if n, _, _, _ := targetRec.snapshot(); n != 0 {
		t.Fatalf("redirect was followed")
	}
}

// TestSuccessBodyCap: a 2xx body over 16 MiB fails without being decoded.
func TestSuccessBodyCap(t *testing.T) {
	t.Parallel()
	for _, declared := range []bool{true, false} {
		t.Run(fmt.Sprintf("content-length=%v", declared), func(t *testing.T) {
			t.Parallel()
			srv, _ := newTestServer(t, func(w http.ResponseWriter, r *http.Request, _ <-chan struct{}) {
				pad := strings.Repeat("x", MaxResponseBytes)
				body := `{"scope_type":"organization","pad":"` + pad + `"}`
				if declared {
					w.Header().Set("Content-Length", fmt.Sprint(len(body)))
				} else {
					w.(http.Flusher).Flush()
				}
				_, _ = w.Write([]byte(body))
			})
			c := newTestClient(t, srv, nil)
			_, err := c.InspectKey(testContext(t))
			if !errors.Is(err, ErrResponseTooLarge) {
				t.Fatalf("err = %v", err)
			}
			if !IsTransient(err) || !MayHaveBeenSent(err) {
				t.Fatalf("oversized success must count as sent and transient")
			}
		})
	}
}

// TestMalformedSuccess: undecodable 2xx bodies and messages missing
// required fields fail with ErrMalformedResponse, without quoting content.
func TestMalformedSuccess(t *testing.T) {
	t.Parallel()
	bodies := map[string]string{
		"syntax":            `{"inbox_id":`,
		"bad timestamp":     `{"inbox_id":"a@b.c","thread_id":"t","message_id":"<m>","timestamp":"SECRET-NOT-A-TIME"}`,
		"missing timestamp": `{"inbox_id":"a@b.c","thread_id":"t","message_id":"<m>"}`,
		"missing thread":    `{"inbox_id":"a@b.c","message_id":"<m>","timestamp":"2026-01-02T03:04:05Z"}`,
		"type mismatch":     `{"inbox_id":"a@b.c","thread_id":"t","message_id":"<m>","timestamp":"2026-01-02T03:04:05Z","to":"SECRET-string"}`,
		"negative size":     `{"inbox_id":"a@b.c","thread_id":"t","message_id":"<m>","timestamp":"2026-01-02T03:04:05Z","attachments":[{"attachment_id":"a","size":-1}]}`,
		"empty":             ``,
	}
	for name, body := range bodies {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			srv, _ := newTestServer(t, func(w http.ResponseWriter, r *http.Request, _ <-chan struct{}) {
				_, _ = w.Write([]byte(body))
			})
			c := newTestClient(t, srv, nil)
			_, err := c.GetMessage(testContext(t), "a@b.c", "<m>")
			if !errors.Is(err, ErrMalformedResponse) {
				t.Fatalf("err = %v", err)
			}
			if strings.Contains(err.Error(), "SECRET") || strings.Contains(err.Error(), "a@b.c") {
				t.Fatalf("error leaks content: %q", err.Error())
			}
		})
	}
}

func TestValidMessageDecodes(t *testing.T) {
	t.Parallel()
	srv, _ := newTestServer(t, func(w http.ResponseWriter, r *http.Request, _ <-chan struct{}) {
		_, _ = w.Write([]byte(`{"inbox_id":"a@b.c","thread_id":"t","message_id":"<m>","timestamp":"2026-01-02T03:04:05+02:00",
			"labels":["received","unread"],"from":"Jane <j@x.y>","to":["a@b.c"],"cc":null,"text":"t","extracted_text":"e",
			"headers":{"Auto-Submitted":"no"},"attachments":[{"attachment_id":"att_1","filename":"f.txt","size":3}],"size":10,"updated_at":"2026-01-02T03:04:05Z"}`))
	})
	c := newTestClient(t, srv, nil)
	m, err := c.GetMessage(testContext(t), "a@b.c", "<m>")
	if err != nil {
		t.Fatal(err)
	}
	if m.SubjectOrDefault() != DefaultSubject || !m.HasLabel("UNREAD") || m.Attachments[0].Size != 3 {
		t.Fatalf("m = %+v", m)
	}
	if v, ok := m.Header("auto-submitted"); !ok || v != "no" {
		t.Fatalf("header lookup: %q %v", v, ok)
	}
	if m.Timestamp.UTC() != time.Date(2026, 1, 2, 1, 4, 5, 0, time.UTC) {
		t.Fatalf("timestamp %v", m.Timestamp)
	}
}

// TestTimeoutIsNetworkError: a request that outlives the client timeout is a
// network timeout that may have been sent and is transient.
func TestTimeoutIsNetworkError(t *testing.T) {
	t.Parallel()
	srv, _ := newTestServer(t, func(w http.ResponseWriter, r *http.Request, release <-chan struct{}) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	c, err := New(Options{BaseURL: srv.URL + "/v0", APIKey: testKey, Timeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.SendMessage(testContext(t), "agent@agentmail.to", SendMessageRequest{To: []string{"x@y.z"}, Text: "t"}, "k1")
	var ne *NetworkError
	if !errors.As(err, &ne) {
		t.Fatalf("err = %v (%T)", err, err)
	}
	if ne.Reason != ReasonTimeout || !ne.Timeout() || !ne.Sent || !MayHaveBeenSent(err) || !IsTransient(err) || !IsNetworkError(err) {
		t.Fatalf("ne = %+v", ne)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("timeout should unwrap to DeadlineExceeded")
	}
	if strings.Contains(err.Error(), "agentmail.to") || strings.Contains(err.Error(), "127.0.0.1") {
		t.Fatalf("error quotes the URL: %q", err)
	}
}

// TestConnectionRefusedNotSent: when no connection is ever made the request
// is definitely not sent.
func TestConnectionRefusedNotSent(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	c, err := New(Options{BaseURL: "http://" + addr + "/v0", APIKey: testKey})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.SendMessage(testContext(t), "agent@agentmail.to", SendMessageRequest{To: []string{"x@y.z"}}, "k1")
	var ne *NetworkError
	if !errors.As(err, &ne) || ne.Sent || MayHaveBeenSent(err) || ne.Reason != ReasonConnectionRefused {
		t.Fatalf("err = %v", err)
	}
	if !IsTransient(err) {
		t.Fatal("a refused connection is transient")
	}
}

// TestConnectionDroppedMaybeSent: the server accepts the request and hangs
// up without answering; the outcome is uncertain.
func TestConnectionDroppedMaybeSent(t *testing.T) {
	t.Parallel()
	srv, _ := newTestServer(t, func(w http.ResponseWriter, r *http.Request, _ <-chan struct{}) {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			_ = conn.Close()
		}
	})
	c := newTestClient(t, srv, nil)
	_, err := c.SendMessage(testContext(t), "agent@agentmail.to", SendMessageRequest{To: []string{"x@y.z"}}, "k1")
	var ne *NetworkError
	if !errors.As(err, &ne) || !ne.Sent || !MayHaveBeenSent(err) {
		t.Fatalf("err = %v", err)
	}
}

// TestCancelledBeforeSend: a context cancelled before the call makes no
// request and is reported as not sent.
func TestCancelledBeforeSend(t *testing.T) {
	t.Parallel()
	srv, rec := newTestServer(t, func(w http.ResponseWriter, r *http.Request, _ <-chan struct{}) {})
	c := newTestClient(t, srv, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := c.SendMessage(ctx, "agent@agentmail.to", SendMessageRequest{}, "k1")
	var ne *NetworkError
	if !errors.As(err, &ne) || ne.Reason != ReasonCanceled || ne.Sent || !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	if n, _, _, _ := rec.snapshot(); n != 0 {
		t.Fatal("request made")
	}
}

// TestArgumentErrors: invalid input is rejected locally, nothing is sent.
func TestArgumentErrors(t *testing.T) {
	t.Parallel()
	srv, rec := newTestServer(t, func(w http.ResponseWriter, r *http.Request, _ <-chan struct{}) {})
	c := newTestClient(t, srv, nil)
	ctx := testContext(t)
	calls := map[string]func() error{
		"empty inbox": func() error { _, err := c.GetInbox(ctx, ""); return err },
		"empty message": func() error {
			_, err := c.ReplyToMessage(ctx, "a@b.c", "", ReplyRequest{}, "k")
			return err
		},
		"bad idempotency key": func() error {
			_, err := c.SendMessage(ctx, "a@b.c", SendMessageRequest{}, "has space")
			return err
		},
		"long idempotency key": func() error {
			_, err := c.SendMessage(ctx, "a@b.c", SendMessageRequest{}, strings.Repeat("k", 257))
			return err
		},
		"no key":        func() error { _, err := c.WithAPIKey("").InspectKey(ctx); return err },
		"key with CRLF": func() error { _, err := c.WithAPIKey("am_x\r\nX-Evil: 1").InspectKey(ctx); return err },
		"empty key id":  func() error { return c.DeleteInboxAPIKey(ctx, "a@b.c", "") },
	}
	for name, call := range calls {
		err := call()
		if !errors.Is(err, ErrInvalidArgument) || MayHaveBeenSent(err) || IsTransient(err) {
			t.Errorf("%s: err = %v", name, err)
		}
		if strings.Contains(err.Error(), "X-Evil") || strings.Contains(err.Error(), "has space") {
			t.Errorf("%s: error quotes the value: %q", name, err)
		}
	}
	if n, _, _, _ := rec.snapshot(); n != 0 {
		t.Fatalf("%d requests made", n)
	}
}

func TestWithAPIKeySharesTransport(t *testing.T) {
	t.Parallel()
	srv, rec := newTestServer(t, func(w http.ResponseWriter, r *http.Request, _ <-chan struct{}) {
		_, _ = w.Write([]byte(`{"scope_type":"inbox","scope_id":"a@b.c","organization_id":"org","inbox_id":"a@b.c"}`))
	})
	c := newTestClient(t, srv, nil)
	id, err := c.WithAPIKey("am_other").InspectKey(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	if id.ScopeType != ScopeInbox || id.InboxID != "a@b.c" {
		t.Fatalf("id = %+v", id)
	}
	_, req, _, _ := rec.snapshot()
	if req.Header.Get("Authorization") != "Bearer am_other" {
		t.Fatal("derived key not used")
	}
	if c.key != testKey {
		t.Fatal("WithAPIKey mutated the original")
	}
}

// TestDeleteNoContent: 204 responses decode to nothing.
func TestDeleteNoContent(t *testing.T) {
	t.Parallel()
	srv, rec := newTestServer(t, func(w http.ResponseWriter, r *http.Request, _ <-chan struct{}) {
		w.WriteHeader(http.StatusNoContent)
	})
	c := newTestClient(t, srv, nil)
	if err := c.DeleteInboxWebhook(testContext(t), "a@b.c", "ep_1"); err != nil {
		t.Fatal(err)
	}
	_, req, raw, _ := rec.snapshot()
	if req.Method != http.MethodDelete || raw != "/v0/inboxes/a%40b.c/webhooks/ep_1" {
		t.Fatalf("%s %s", req.Method, raw)
	}
}

// TestDoRawRequest: the generic entry point classifies unmatched requests as
// operation "request".
func TestDoRawRequest(t *testing.T) {
	t.Parallel()
	srv, _ := newTestServer(t, func(w http.ResponseWriter, r *http.Request, _ <-chan struct{}) {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"code":"validation_error","message":"SECRET"}`))
	})
	c := newTestClient(t, srv, nil)
	err := c.Do(testContext(t), http.MethodPatch, "inboxes/a%40b.c", nil, map[string]string{"display_name": "x"}, nil)
	pe := asError(t, err)
	if pe.Operation != OpRequest || pe.Code != CodeValidationError || pe.Status != 400 {
		t.Fatalf("got %+v", pe)
	}
	if got := pe.Error(); got != "AgentMail request failed (400) [operation=request, code=validation_error]" {
		t.Fatalf("Error() = %q", got)
	}
}
