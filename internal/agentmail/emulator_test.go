package agentmail

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/emulator"
)

// emu is a running emulator plus a client for it. Scenario tests drive the
// emulator's HTTP control API (docs/emulator.md) rather than its Go internals.
type emu struct {
	t      *testing.T
	srv    *emulator.Server
	base   string // http://127.0.0.1:PORT
	client *Client
}

func startEmulator(t *testing.T, keys ...string) *emu {
	t.Helper()
	if len(keys) == 0 {
		keys = []string{testKey}
	}
	srv, err := emulator.Start(testContext(t), emulator.Options{APIKeys: keys, DeliveryDelay: -1})
	if err != nil {
		t.Fatalf("emulator.Start: %v", err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	c, err := New(Options{BaseURL: srv.URL() + "/v0", APIKey: keys[0]})
	if err != nil {
		t.Fatal(err)
	}
	return &emu{t: t, srv: srv, base: srv.URL(), client: c}
}

// clientWith returns a client for the emulator whose transport is wrapped
// by cc (for counting body closes).
func (e *emu) clientWith(cc *closeCounter) *Client {
	cc.base = http.DefaultTransport
	c, err := New(Options{BaseURL: e.base + "/v0", APIKey: testKey, HTTPClient: &http.Client{Transport: cc}})
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

// control calls the emulator control API and decodes the JSON answer.
func (e *emu) control(method, path string, body, out any) {
	e.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			e.t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(testContext(e.t), method, e.base+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatalf("control %s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		e.t.Fatalf("control %s %s: %d %s", method, path, resp.StatusCode, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			e.t.Fatalf("control %s %s: decode %s: %v", method, path, b, err)
		}
	}
}

// fault installs an emulator fault (POST /_emulator/faults).
func (e *emu) fault(f map[string]any) {
	e.t.Helper()
	e.control(http.MethodPost, "/_emulator/faults", f, nil)
}

func (e *emu) clearFaults() {
	e.t.Helper()
	e.control(http.MethodDelete, "/_emulator/faults", nil, nil)
}

// requests returns the provider requests the emulator recorded under
// prefix.
func (e *emu) requests(prefix string) []emulator.RecordedRequest {
	e.t.Helper()
	var out struct {
		Requests []emulator.RecordedRequest `json:"requests"`
	}
	e.control(http.MethodGet, "/_emulator/requests?path_prefix="+url.QueryEscape(prefix), nil, &out)
	return out.Requests
}

func (e *emu) clearRequests() {
	e.t.Helper()
	e.control(http.MethodDelete, "/_emulator/requests", nil, nil)
}

type deliverResult struct {
	MessageID string `json:"message_id"`
	ThreadID  string `json:"thread_id"`
}

// deliver injects an inbound email into an emulator inbox.
func (e *emu) deliver(inboxID string, msg map[string]any) deliverResult {
	e.t.Helper()
	var out deliverResult
	e.control(http.MethodPost, "/_emulator/inboxes/"+url.PathEscape(inboxID)+"/deliver", msg, &out)
	return out
}

// createInbox creates username@agentmail.to through the client.
func (e *emu) createInbox(username string) *Inbox {
	e.t.Helper()
	in, err := e.client.CreateInbox(testContext(e.t), CreateInboxRequest{Username: username, DisplayName: "Agent", ClientID: "paperclip-" + username})
	if err != nil {
		e.t.Fatalf("CreateInbox: %v", err)
	}
	return in
}

// TestEmulatorLifecycle exercises every client operation against the
// emulator's real behaviour.
func TestEmulatorLifecycle(t *testing.T) {
	t.Parallel()
	e := startEmulator(t)
	ctx := testContext(t)
	c := e.client

	id, err := c.InspectKey(ctx)
	if err != nil || id.ScopeType != ScopeOrganization || id.OrganizationID == "" {
		t.Fatalf("InspectKey: %+v %v", id, err)
	}

	in := e.createInbox("agent")
	if in.InboxID != "agent@agentmail.to" || in.ClientID != "paperclip-agent" || in.CreatedAt.IsZero() {
		t.Fatalf("inbox %+v", in)
	}
	again, err := c.CreateInbox(ctx, CreateInboxRequest{Username: "agent", DisplayName: "Agent", ClientID: "paperclip-agent"})
	if err != nil || again.InboxID != in.InboxID {
		t.Fatalf("client_id replay: %+v %v", again, err)
	}
	got, err := c.GetInbox(ctx, in.InboxID)
	if err != nil || got.InboxID != in.InboxID {
		t.Fatalf("GetInbox: %+v %v", got, err)
	}
	list, err := c.ListInboxes(ctx, ListParams{Limit: 100})
	if err != nil || len(list.Inboxes) != 1 || list.Inboxes[0].InboxID != in.InboxID {
		t.Fatalf("ListInboxes: %+v %v", list, err)
	}
	if _, err := c.GetInbox(ctx, "nobody@agentmail.to"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing inbox: %v", err)
	}

	// Address taken: a second inbox with the same username but another
	// client id.
	_, err = c.CreateInbox(ctx, CreateInboxRequest{Username: "agent", ClientID: "paperclip-other"})
	if !IsAddressTaken(err) {
		t.Fatalf("taken address: %v", err)
	}
	if p, ok := ProblemFor(err); !ok || p.Status != http.StatusConflict || p.Code != ProblemAddressTaken {
		t.Fatalf("taken address problem: %+v", p)
	}

	// Inbox-scoped runtime key.
	key, err := c.CreateInboxAPIKey(ctx, in.InboxID, CreateAPIKeyRequest{Name: "Paperclip email runtime"})
	if err != nil || key.APIKey == "" || key.APIKeyID == "" {
		t.Fatalf("CreateInboxAPIKey: %+v %v", key, err)
	}
	rt := c.WithAPIKey(key.APIKey)
	rid, err := rt.InspectKey(ctx)
	if err != nil || rid.ScopeType != ScopeInbox || rid.InboxID != in.InboxID {
		t.Fatalf("runtime key scope: %+v %v", rid, err)
	}

	// Domains.
	if err := c.Do(ctx, http.MethodPost, "/domains", nil, map[string]any{"domain": "example.com"}, nil); err != nil {
		t.Fatalf("create domain: %v", err)
	}
	doms, err := c.ListDomains(ctx, ListParams{Limit: 100})
	if err != nil || len(doms.Domains) != 1 {
		t.Fatalf("ListDomains: %+v %v", doms, err)
	}
	d, err := c.GetDomain(ctx, doms.Domains[0].DomainID)
	if err != nil || d.Verified() {
		t.Fatalf("GetDomain before verify: %+v %v", d, err)
	}
	e.control(http.MethodPost, "/_emulator/domains/example.com/verify", nil, nil)
	if d, err = c.GetDomain(ctx, doms.Domains[0].DomainID); err != nil || !d.Verified() {
		t.Fatalf("GetDomain after verify: %+v %v", d, err)
	}

	// Webhooks.
	wh, err := c.CreateInboxWebhook(ctx, in.InboxID, CreateWebhookRequest{URL: "https://paperclip.example/api/chat-webhooks/agentmail/x", EventTypes: ChannelEventTypes(), ClientID: "paperclip-agent"})
	if err != nil || wh.WebhookID == "" || !strings.HasPrefix(wh.Secret, "whsec_") {
		t.Fatalf("CreateInboxWebhook: %+v %v", wh, err)
	}
	whs, err := c.ListInboxWebhooks(ctx, in.InboxID, ListParams{})
	if err != nil || len(whs.Webhooks) != 1 || whs.Webhooks[0].WebhookID != wh.WebhookID {
		t.Fatalf("ListInboxWebhooks: %+v %v", whs, err)
	}
	if err := c.DeleteInboxWebhook(ctx, in.InboxID, wh.WebhookID); err != nil {
		t.Fatalf("DeleteInboxWebhook: %v", err)
	}

	// Inbound mail, listing with pagination, get, thread.
	first := e.deliver(in.InboxID, map[string]any{"from": "Jane <jane@example.com>", "subject": "Hello", "text": "one", "message_id": "<m1@example.com>", "date": "Fri, 02 Jan 2026 10:00:00 +0000"})
	e.deliver(in.InboxID, map[string]any{"from": "jane@example.com", "subject": "Re: Hello", "text": "two", "message_id": "<m2@example.com>", "in_reply_to": "<m1@example.com>", "date": "Fri, 02 Jan 2026 11:00:00 +0000"})
	e.deliver(in.InboxID, map[string]any{"from": "bob@example.com", "subject": "Other", "text": "three", "message_id": "<m3@example.com>", "date": "Fri, 02 Jan 2026 12:00:00 +0000",
		"attachments": []map[string]string{{"filename": "note.txt", "content_type": "text/plain", "content_base64": base64.StdEncoding.EncodeToString([]byte("hello bytes"))}}})

	var ids []string
	token := ""
	for page := 0; ; page++ {
		if page > 10 {
			t.Fatal("pagination does not end")
		}
		res, err := rt.ListMessages(ctx, in.InboxID, ListMessagesParams{Limit: 1, Ascending: true, PageToken: token})
		if err != nil {
			t.Fatalf("ListMessages: %v", err)
		}
		for _, m := range res.Messages {
			ids = append(ids, m.MessageID)
		}
		if res.NextPageToken == "" {
			break
		}
		token = res.NextPageToken
	}
	if strings.Join(ids, ",") != "<m1@example.com>,<m2@example.com>,<m3@example.com>" {
		t.Fatalf("ascending scan %v", ids)
	}
	lm := e.requests("/v0/inboxes/agent%40agentmail.to/messages")
	if len(lm) == 0 || !strings.Contains(lm[0].Query, "ascending=true") || !strings.Contains(lm[0].Query, "limit=1") {
		t.Fatalf("recorded list query %+v", lm)
	}

	m, err := rt.GetMessage(ctx, in.InboxID, "<m1@example.com>")
	if err != nil || m.ThreadID != first.ThreadID || !m.HasLabel("received") || m.From != "Jane <jane@example.com>" {
		t.Fatalf("GetMessage: %+v %v", m, err)
	}
	th, err := rt.GetThread(ctx, in.InboxID, first.ThreadID, ThreadParams{})
	if err != nil || len(th.Messages) != 2 || th.Messages[0].MessageID != "<m1@example.com>" {
		t.Fatalf("GetThread: %+v %v", th, err)
	}

	// Attachment locator and guarded download.
	m3, err := rt.GetMessage(ctx, in.InboxID, "<m3@example.com>")
	if err != nil || len(m3.Attachments) != 1 {
		t.Fatalf("attachment message: %+v %v", m3, err)
	}
	loc, err := rt.GetAttachment(ctx, in.InboxID, "<m3@example.com>", m3.Attachments[0].AttachmentID)
	if err != nil || loc.DownloadURL == "" || loc.Size != int64(len("hello bytes")) {
		t.Fatalf("GetAttachment: %+v %v", loc, err)
	}
	dl, err := rt.DownloadAttachment(ctx, loc.DownloadURL, 1024)
	if err != nil || string(dl.Data) != "hello bytes" {
		t.Fatalf("DownloadAttachment: %+v %v", dl, err)
	}
	if _, err := rt.DownloadAttachment(ctx, loc.DownloadURL, 4); !errors.Is(err, ErrResponseTooLarge) {
		t.Fatalf("cap not enforced: %v", err)
	}

	// Sends: new email, idempotent replay, conflicting replay, reply.
	req := SendMessageRequest{To: []string{"someone@example.org"}, Subject: "Hi", Text: "body", Headers: map[string]string{"X-Paperclip-Publication-Id": "11111111-1111-4111-8111-111111111111"}}
	s1, err := rt.SendMessage(ctx, in.InboxID, req, "11111111-1111-4111-8111-111111111111")
	if err != nil {
		t.Fatalf("SendMessage: %v", err)
	}
	s2, err := rt.SendMessage(ctx, in.InboxID, req, "11111111-1111-4111-8111-111111111111")
	if err != nil || *s2 != *s1 {
		t.Fatalf("idempotent replay: %+v %v", s2, err)
	}
	req.Text = "different"
	if _, err := rt.SendMessage(ctx, in.InboxID, req, "11111111-1111-4111-8111-111111111111"); !errors.Is(err, ErrConflict) {
		t.Fatalf("conflicting replay: %v", err)
	}
	f := false
	r1, err := rt.ReplyToMessage(ctx, in.InboxID, "<m2@example.com>", ReplyRequest{To: []string{"jane@example.com"}, ReplyAll: &f, Text: "thanks"}, "22222222-2222-4222-8222-222222222222")
	if err != nil || r1.ThreadID != first.ThreadID {
		t.Fatalf("ReplyToMessage: %+v %v", r1, err)
	}
	if _, err := rt.ReplyAllToMessage(ctx, in.InboxID, "<m2@example.com>", ReplyAllRequest{Text: "all"}, "33333333-3333-4333-8333-333333333333"); err != nil {
		t.Fatalf("ReplyAllToMessage: %v", err)
	}
	sends := e.requests("/v0/inboxes/agent%40agentmail.to/messages/")
	var sawReply bool
	for _, r := range sends {
		if r.Method == http.MethodPost && r.Path == "/v0/inboxes/agent%40agentmail.to/messages/%3Cm2%40example.com%3E/reply" {
			sawReply = true
			if r.IdempotencyKey == nil || *r.IdempotencyKey != "22222222-2222-4222-8222-222222222222" {
				t.Fatalf("reply idempotency key %v", r.IdempotencyKey)
			}
		}
	}
	if !sawReply {
		t.Fatalf("escaped reply path not recorded: %+v", sends)
	}

	if err := c.DeleteInboxAPIKey(ctx, in.InboxID, key.APIKeyID); err != nil {
		t.Fatalf("DeleteInboxAPIKey: %v", err)
	}
	// The emulator models the gateway: an unknown key gets a bare 403
	// (documented AgentMail behaviour is a 401 unknown_api_key); both are
	// auth failures.
	if _, err := rt.InspectKey(ctx); !IsAuthFailure(err) {
		t.Fatalf("deleted key still works: %v", err)
	}
}

// TestEmulatorRedactedErrors: the provider's
// message, fix and docs never reach the error, whose string has the exact
// fixed form, and exactly one request is made.
func TestEmulatorRedactedErrors(t *testing.T) {
	t.Parallel()
	e := startEmulator(t)
	for _, code := range []string{CodeMissingPermission, CodeLimitExceeded, CodeDomainNotVerified} {
		e.clearRequests()
		e.fault(map[string]any{
			"match":  map[string]any{"operation": OpCreateInbox},
			"status": 403,
			"times":  1,
			"body": map[string]any{"name": "ForbiddenError", "code": code, "message": "PROVIDER-CANARY message for agent@agentmail.to",
				"fix": "PROVIDER-CANARY fix: grant inbox_create", "docs": "https://docs.agentmail.to/errors#PROVIDER-CANARY"},
		})
		_, err := e.client.CreateInbox(testContext(t), CreateInboxRequest{Username: "agent", ClientID: "paperclip-x"})
		pe := asError(t, err)
		if pe.Status != 403 || pe.Operation != OpCreateInbox || pe.Code != code {
			t.Fatalf("%s: %+v", code, pe)
		}
		want := "AgentMail request failed (403) [operation=create_inbox, code=" + code + "]"
		if err.Error() != want {
			t.Fatalf("Error() = %q, want %q", err.Error(), want)
		}
		js, _ := json.Marshal(err)
		for _, s := range []string{err.Error(), fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", err), string(js), Describe(err)} {
			if strings.Contains(s, "PROVIDER-CANARY") || strings.Contains(s, "agent@agentmail.to") || strings.Contains(s, testKey) {
				t.Fatalf("%s: leak in %q", code, s)
			}
		}
		if n := len(e.requests("/v0/inboxes")); n != 1 {
			t.Fatalf("%s: %d requests, want exactly 1", code, n)
		}
	}
}

// TestEmulatorUnrecognizedBodies: error bodies the client does not
// recognise yield the unknown code with the status kept.
func TestEmulatorUnrecognizedBodies(t *testing.T) {
	t.Parallel()
	e := startEmulator(t)
	bodies := map[string]any{
		"plain text":           "Forbidden by gateway",
		"non-allowlisted code": map[string]any{"code": "brand_new_code", "message": "x"},
		"array code":           map[string]any{"code": []string{"missing_permission"}},
		"top-level array":      []any{map[string]any{"code": "missing_permission"}},
		"no code":              map[string]any{"message": "Forbidden"},
		"null":                 nil,
	}
	for name, body := range bodies {
		f := map[string]any{"match": map[string]any{"operation": OpListInboxes}, "status": 403, "times": 1}
		if body == nil {
			f["body"] = json.RawMessage("null")
		} else {
			f["body"] = body
		}
		e.fault(f)
		_, err := e.client.ListInboxes(testContext(t), ListParams{Limit: 100})
		pe := asError(t, err)
		if pe.Status != 403 || pe.Code != CodeUnknown || pe.Operation != OpListInboxes {
			t.Errorf("%s: %+v", name, pe)
		}
	}
}

// TestEmulatorOperationNames, end to end: for each of
// the 16 operations a fault keyed by the emulator's own operation name
// answers the client's request, proving both sides classify it alike.
func TestEmulatorOperationNames(t *testing.T) {
	t.Parallel()
	e := startEmulator(t)
	c := e.client
	const inbox, msg = "agent@agentmail.to", "<m@example.com>"
	calls := map[string]func(ctx context.Context) error{
		OpInspectKey:  func(ctx context.Context) error { _, err := c.InspectKey(ctx); return err },
		OpListInboxes: func(ctx context.Context) error { _, err := c.ListInboxes(ctx, ListParams{Limit: 100}); return err },
		OpCreateInbox: func(ctx context.Context) error { _, err := c.CreateInbox(ctx, CreateInboxRequest{}); return err },
		OpGetInbox:    func(ctx context.Context) error { _, err := c.GetInbox(ctx, inbox); return err },
		OpListDomains: func(ctx context.Context) error { _, err := c.ListDomains(ctx, ListParams{Limit: 100}); return err },
		OpGetDomain:   func(ctx context.Context) error { _, err := c.GetDomain(ctx, "example.com"); return err },
		OpCreateInboxKey: func(ctx context.Context) error {
			_, err := c.CreateInboxAPIKey(ctx, inbox, CreateAPIKeyRequest{Name: "Paperclip email runtime"})
			return err
		},
		OpDeleteInboxKey: func(ctx context.Context) error { return c.DeleteInboxAPIKey(ctx, inbox, "key_1") },
		OpCreateWebhook: func(ctx context.Context) error {
			_, err := c.CreateInboxWebhook(ctx, inbox, CreateWebhookRequest{URL: "https://x.example/h", EventTypes: ChannelEventTypes()})
			return err
		},
		OpDeleteWebhook: func(ctx context.Context) error { return c.DeleteInboxWebhook(ctx, inbox, "ep_1") },
		OpListMessages: func(ctx context.Context) error {
			_, err := c.ListMessages(ctx, inbox, ListMessagesParams{Limit: 100, Ascending: true})
			return err
		},
		OpGetMessage: func(ctx context.Context) error { _, err := c.GetMessage(ctx, inbox, msg); return err },
		OpGetThread: func(ctx context.Context) error {
			_, err := c.GetThread(ctx, inbox, "thd_1", ThreadParams{})
			return err
		},
		OpSendMessage: func(ctx context.Context) error {
			_, err := c.SendMessage(ctx, inbox, SendMessageRequest{To: []string{"x@example.org"}}, "k-1")
			return err
		},
		OpReplyMessage: func(ctx context.Context) error {
			_, err := c.ReplyToMessage(ctx, inbox, msg, ReplyRequest{Text: "x"}, "k-2")
			return err
		},
		OpGetAttachment: func(ctx context.Context) error { _, err := c.GetAttachment(ctx, inbox, msg, "att_1"); return err },
	}
	if len(calls) != 16 {
		t.Fatalf("%d operations", len(calls))
	}
	for op, call := range calls {
		e.fault(map[string]any{"match": map[string]any{"operation": op}, "status": 409, "code": CodeRaceCondition, "times": 1})
		err := call(testContext(t))
		pe := asError(t, err)
		if pe.Operation != op || pe.Status != 409 || pe.Code != CodeRaceCondition {
			t.Errorf("%s: got %+v", op, pe)
		}
		e.clearFaults()
	}
	// Unmatched requests are "request" on both sides.
	e.fault(map[string]any{"match": map[string]any{"operation": OpRequest}, "status": 400, "code": CodeValidationError})
	err := c.Do(testContext(t), http.MethodPatch, "/inboxes/agent%40agentmail.to", nil, map[string]any{"display_name": "x"}, nil)
	if pe := asError(t, err); pe.Operation != OpRequest || pe.Code != CodeValidationError {
		t.Errorf("PATCH: %+v", pe)
	}
	err = c.Do(testContext(t), http.MethodGet, "/totally/arbitrary", nil, nil, nil)
	if pe := asError(t, err); pe.Operation != OpRequest {
		t.Errorf("arbitrary path: %+v", pe)
	}
}

// TestEmulatorOversizedBody: an error body over the 8 KiB limit, served by
// the emulator, yields the unknown code with the status kept.
func TestEmulatorOversizedBody(t *testing.T) {
	t.Parallel()
	e := startEmulator(t)
	e.fault(map[string]any{"match": map[string]any{"operation": OpGetInbox}, "status": 403,
		"body": map[string]any{"code": CodeMissingPermission, "pad": strings.Repeat("p", MaxErrorBodyBytes)}})
	cc := &closeCounter{}
	_, err := e.clientWith(cc).GetInbox(testContext(t), "agent@agentmail.to")
	pe := asError(t, err)
	if pe.Status != 403 || pe.Code != CodeUnknown || pe.Operation != OpGetInbox {
		t.Fatalf("got %+v", pe)
	}
	if n := cc.closes.Load(); n != 1 {
		t.Fatalf("body closed %d times", n)
	}
}

// TestEmulatorStalledBody, against the emulator: the
// stalled body yields unknown after the read timer, the status is kept, and
// the body is closed once even though Close reports an error.
func TestEmulatorStalledBody(t *testing.T) {
	t.Parallel()
	e := startEmulator(t)
	e.fault(map[string]any{"match": map[string]any{"operation": OpGetMessage}, "status": 503, "code": CodeServiceUnavailable, "stall": true})
	cc := &closeCounter{closeErr: errors.New("cancel rejected")}
	_, err := e.clientWith(cc).GetMessage(testContext(t), "agent@agentmail.to", "<m@x>")
	pe := asError(t, err)
	if pe.Status != 503 || pe.Code != CodeUnknown || !errors.Is(err, ErrServerError) || !IsTransient(err) {
		t.Fatalf("got %+v", pe)
	}
	if n := cc.closes.Load(); n != 1 {
		t.Fatalf("body closed %d times", n)
	}
}

// TestEmulatorRateLimitBrokenBody, against the emulator: a 429 whose body never completes keeps Retry-After 9, the
// operation send_message, and one request.
func TestEmulatorRateLimitBrokenBody(t *testing.T) {
	t.Parallel()
	e := startEmulator(t)
	e.fault(map[string]any{"match": map[string]any{"operation": OpSendMessage}, "status": 429, "code": CodeRateLimitExceeded,
		"headers": map[string]string{"Retry-After": "9"}, "stall": true})
	_, err := e.client.SendMessage(testContext(t), "agent@agentmail.to", SendMessageRequest{To: []string{"x@example.org"}}, "pub-429")
	pe := asError(t, err)
	if pe.Status != 429 || pe.RetryAfter != 9*time.Second || pe.Operation != OpSendMessage || pe.Code != CodeUnknown {
		t.Fatalf("got %+v", pe)
	}
	// The emulator records a stalled request once the client has gone away.
	waitFor(t, "the request to be recorded", func() bool { return len(e.requests("/v0/inboxes")) > 0 })
	if n := len(e.requests("/v0/inboxes")); n != 1 {
		t.Fatalf("%d requests, want 1", n)
	}
}

// TestEmulatorUnreadableBody: an error body that cannot be read, served by
// the emulator, yields the unknown code with the status kept.
func TestEmulatorUnreadableBody(t *testing.T) {
	t.Parallel()
	e := startEmulator(t)
	for _, status := range []int{403, 429} {
		e.fault(map[string]any{"match": map[string]any{"operation": OpInspectKey}, "status": status, "code": CodeMissingPermission,
			"headers": map[string]string{"Retry-After": "3"}, "times": 1})
		cc := &closeCounter{breakBody: true}
		_, err := e.clientWith(cc).InspectKey(testContext(t))
		pe := asError(t, err)
		if pe.Status != status || pe.Code != CodeUnknown || pe.RetryAfter != 3*time.Second {
			t.Fatalf("%d: %+v", status, pe)
		}
	}
}

// TestEmulatorProblemMapping checks the provider-error mapping with real
// emulator responses: each fault goes through the client and ProblemFor.
func TestEmulatorProblemMapping(t *testing.T) {
	t.Parallel()
	e := startEmulator(t)
	cases := []struct {
		op, code   string
		status     int
		wantStatus int
		wantCode   string
		contains   string
	}{
		{OpCreateInboxKey, CodeNotFound, 404, 422, ProblemRequestFailed, "The email address was saved"},
		{OpCreateInbox, CodeResourceTaken, 403, 409, ProblemAddressTaken, "This email address is already in use. Choose a different address."},
		{OpCreateInbox, CodeAlreadyExists, 403, 409, ProblemAddressTaken, "already in use"},
		{OpCreateInboxKey, CodeResourceTaken, 403, 422, ProblemRequestFailed, "create an inbox-scoped API key"},
		{OpCreateInbox, CodeUnknownAPIKey, 401, 422, ProblemRequestFailed, "rejected the API key"},
		{OpCreateInbox, CodeMissingPermission, 403, 422, ProblemRequestFailed, "did not allow Paperclip to create the email address"},
		{OpCreateInbox, CodeValidationError, 400, 422, ProblemRequestFailed, "Try a different address"},
		{OpCreateInbox, CodeNotFound, 404, 422, ProblemRequestFailed, "could not find"},
		{OpCreateInbox, CodeRateLimitExceeded, 429, 429, ProblemRequestFailed, "rate limiting"},
		{OpCreateInbox, CodeServiceUnavailable, 503, 502, ProblemRequestFailed, "temporarily unavailable"},
		{OpInspectKey, CodeUnauthorized, 401, 422, ProblemRequestFailed, "rejected the API key"},
	}
	calls := map[string]func() error{
		OpCreateInbox: func() error {
			_, err := e.client.CreateInbox(testContext(t), CreateInboxRequest{Username: "agent"})
			return err
		},
		OpCreateInboxKey: func() error {
			_, err := e.client.CreateInboxAPIKey(testContext(t), "agent@agentmail.to", CreateAPIKeyRequest{Name: "Paperclip email runtime"})
			return err
		},
		OpInspectKey: func() error { _, err := e.client.InspectKey(testContext(t)); return err },
	}
	for _, c := range cases {
		f := map[string]any{"match": map[string]any{"operation": c.op}, "status": c.status, "times": 1,
			"body": map[string]any{"code": c.code, "message": "PROVIDER-CANARY"}}
		if c.status == 429 {
			f["headers"] = map[string]string{"Retry-After": "12"}
		}
		e.fault(f)
		err := calls[c.op]()
		p, ok := ProblemFor(err)
		if !ok || p.Status != c.wantStatus || p.Code != c.wantCode || !strings.Contains(p.Message, c.contains) {
			t.Errorf("%s %d %s: %+v", c.op, c.status, c.code, p)
			continue
		}
		if p.Details != (ProblemDetails{Code: c.code, ProviderStatus: c.status, Operation: c.op, Field: p.Details.Field}) {
			t.Errorf("%s: details %+v", c.op, p.Details)
		}
		if c.status == 429 && p.RetryAfterSeconds != 12 {
			t.Errorf("Retry-After %d", p.RetryAfterSeconds)
		}
		if strings.Contains(p.Message, "PROVIDER-CANARY") {
			t.Errorf("provider text in message")
		}
	}
}

// TestEmulatorRedirectRefused: a 3xx from the provider is an error and is
// not followed.
func TestEmulatorRedirectRefused(t *testing.T) {
	t.Parallel()
	e := startEmulator(t)
	e.fault(map[string]any{"match": map[string]any{"operation": OpInspectKey}, "status": 307,
		"headers": map[string]string{"Location": e.base + "/v0/inboxes"}, "body": map[string]any{}})
	_, err := e.client.InspectKey(testContext(t))
	if pe := asError(t, err); pe.Status != 307 {
		t.Fatalf("got %+v", pe)
	}
	for _, r := range e.requests("/v0/inboxes") {
		t.Fatalf("redirect followed: %+v", r)
	}
}

// TestEmulatorNetworkErrors distinguishes "maybe sent" from "not sent"
// against a real emulator: a delayed response past the client timeout may
// have been processed; a stopped emulator refuses the connection.
func TestEmulatorNetworkErrors(t *testing.T) {
	t.Parallel()
	e := startEmulator(t)
	e.createInbox("agent")
	e.fault(map[string]any{"match": map[string]any{"operation": OpSendMessage}, "delay_ms": 2000})
	short, err := New(Options{BaseURL: e.base + "/v0", APIKey: testKey, Timeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	_, err = short.SendMessage(testContext(t), "agent@agentmail.to", SendMessageRequest{To: []string{"x@example.org"}, Text: "t"}, "pub-timeout")
	var ne *NetworkError
	if !errors.As(err, &ne) || ne.Reason != ReasonTimeout || !MayHaveBeenSent(err) || !IsTransient(err) {
		t.Fatalf("timeout: %v", err)
	}
	// The retry with the same key returns the original send once the first
	// attempt completes (idempotency makes the uncertain case safe).
	e.clearFaults()
	var s *SendMessageResponse
	waitFor(t, "idempotent retry", func() bool {
		s, err = e.client.SendMessage(testContext(t), "agent@agentmail.to", SendMessageRequest{To: []string{"x@example.org"}, Text: "t"}, "pub-timeout")
		return err == nil
	})
	var out struct {
		Messages []struct {
			MessageID string `json:"message_id"`
		} `json:"messages"`
	}
	e.control(http.MethodGet, "/_emulator/outbox?to=x@example.org", nil, &out)
	if len(out.Messages) != 1 || out.Messages[0].MessageID != s.MessageID {
		t.Fatalf("outbox %+v, send %+v", out, s)
	}

	_ = e.srv.Close()
	// A fresh client: a pooled connection the server has just closed may
	// already have carried request bytes, which is honestly "maybe sent".
	fresh, err := New(Options{BaseURL: e.base + "/v0", APIKey: testKey})
	if err != nil {
		t.Fatal(err)
	}
	_, err = fresh.SendMessage(testContext(t), "agent@agentmail.to", SendMessageRequest{To: []string{"x@example.org"}}, "pub-down")
	if !errors.As(err, &ne) || ne.Sent || MayHaveBeenSent(err) {
		t.Fatalf("stopped emulator: %v", err)
	}
}

// TestEmulatorWebSocket: a runtime key subscribes, inbound mail and a send
// arrive as normalizable frames, a dropped socket ends the stream, and a
// bad key is an auth failure.
func TestEmulatorWebSocket(t *testing.T) {
	t.Parallel()
	e := startEmulator(t)
	ctx := testContext(t)
	in := e.createInbox("agent")
	key, err := e.client.CreateInboxAPIKey(ctx, in.InboxID, CreateAPIKeyRequest{Name: "Paperclip email runtime"})
	if err != nil {
		t.Fatal(err)
	}
	wsURL := "ws" + strings.TrimPrefix(e.base, "http") + "/v0"
	s, err := Dial(ctx, wsURL, key.APIKey, []string{in.InboxID}, nil)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	defer s.Close()

	res := e.deliver(in.InboxID, map[string]any{"from": "jane@example.com", "subject": "Hi", "text": strings.Repeat("long body ", 10000), "message_id": "<ws1@example.com>"})
	ev := nextEvent(t, s)
	if ev.Kind != EventMessageReceived || ev.InboxID != in.InboxID || ev.MessageID != "<ws1@example.com>" || ev.ThreadID != res.ThreadID || ev.EventID == "" {
		t.Fatalf("received event %+v", ev)
	}
	sent, err := e.client.WithAPIKey(key.APIKey).SendMessage(ctx, in.InboxID, SendMessageRequest{To: []string{"bob@example.org"}, Text: "x"}, "pub-ws")
	if err != nil {
		t.Fatal(err)
	}
	for {
		ev = nextEvent(t, s)
		if ev.Kind == EventMessageSent {
			break
		}
	}
	if ev.MessageID != sent.MessageID || strings.Join(ev.Recipients, ",") != "bob@example.org" {
		t.Fatalf("sent event %+v", ev)
	}

	e.control(http.MethodPost, "/_emulator/websockets/drop", nil, nil)
	for {
		_, err = s.Next(ctx)
		if err != nil {
			break
		}
	}
	var se *StreamError
	if !errors.As(err, &se) || se.Reason != StreamReasonClosed || IsAuthFailure(err) {
		t.Fatalf("drop: %v", err)
	}

	_, err = Dial(ctx, wsURL, "am_not_a_real_key", []string{in.InboxID}, nil)
	if !IsAuthFailure(err) {
		t.Fatalf("bad key: %v", err)
	}
	if strings.Contains(err.Error(), "am_not_a_real_key") {
		t.Fatal("key leaked")
	}
}

func nextEvent(t *testing.T, s *Stream) *Event {
	t.Helper()
	for {
		f, err := s.Next(testContext(t))
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		ev, err := f.Event()
		if err != nil {
			t.Fatalf("normalize %s: %v", f.Raw, err)
		}
		if ev != nil {
			return ev
		}
	}
}

// TestEmulatorWebhookSignature: the emulator's Svix-signed deliveries verify
// with our verifier over the raw body, and the bodies normalize.
func TestEmulatorWebhookSignature(t *testing.T) {
	t.Parallel()
	e := startEmulator(t)
	ctx := testContext(t)
	in := e.createInbox("hooks")

	type delivery struct {
		body []byte
		h    http.Header
	}
	got := make(chan delivery, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- delivery{body: b, h: r.Header.Clone()}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	wh, err := e.client.CreateInboxWebhook(ctx, in.InboxID, CreateWebhookRequest{URL: srv.URL + "/api/chat-webhooks/agentmail/pub1", EventTypes: ChannelEventTypes(), ClientID: "paperclip-hooks"})
	if err != nil {
		t.Fatal(err)
	}
	v, err := NewWebhookVerifier(wh.Secret)
	if err != nil {
		t.Fatal(err)
	}
	e.deliver(in.InboxID, map[string]any{"from": "jane@example.com", "subject": "Hook", "text": "x", "message_id": "<hook1@example.com>"})
	var d delivery
	select {
	case d = <-got:
	case <-ctx.Done():
		t.Fatal("no webhook delivery")
	}
	if err := v.Verify(d.body, d.h); err != nil {
		t.Fatalf("signature: %v (headers %v)", err, d.h)
	}
	if err := v.Verify(append(d.body, ' '), d.h); !errors.Is(err, ErrInvalidWebhookSignature) {
		t.Fatalf("modified body accepted: %v", err)
	}
	ev, err := NormalizeEvent(d.body)
	if err != nil || ev == nil || ev.Kind != EventMessageReceived || ev.MessageID != "<hook1@example.com>" || ev.InboxID != in.InboxID {
		t.Fatalf("webhook event %+v %v", ev, err)
	}
}
