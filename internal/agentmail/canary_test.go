package agentmail

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
)

// Canary values: if any of these shows up in an error string or log line,
// a secret or provider text has leaked.
const (
	canaryKey     = "am_CANARY_KEY_7f3e9a1b"
	canaryMessage = "CANARY_PROVIDER_MESSAGE"
	canaryFix     = "CANARY_PROVIDER_FIX"
	canaryDocs    = "https://docs.agentmail.to/errors#CANARY_DOCS"
	canaryInbox   = "canary-inbox-91c2@agentmail.to"
	canaryMsgID   = "<canary-message-5d1e@example.com>"
)

var canaries = []string{canaryKey, "CANARY_KEY", canaryMessage, canaryFix, "CANARY_DOCS", "canary-inbox", "canary-message", "canary-inbox-91c2%40agentmail.to"}

// assertNoCanary checks every rendering of err the server might log.
func assertNoCanary(t *testing.T, label string, err error) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: expected an error", label)
	}
	var logBuf bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&logBuf, nil))
	logger.Error("provider call failed", "err", err, "detail", Describe(err))
	js, _ := json.Marshal(err)
	renderings := map[string]string{
		"Error()":  err.Error(),
		"%v":       fmt.Sprintf("%v", err),
		"%+v":      fmt.Sprintf("%+v", err),
		"%#v":      fmt.Sprintf("%#v", err),
		"Describe": Describe(err),
		"json":     string(js),
		"slog":     logBuf.String(),
		"wrapped":  fmt.Errorf("outer: %w", err).Error(),
	}
	for how, s := range renderings {
		for _, c := range canaries {
			if strings.Contains(s, c) {
				t.Errorf("%s: %s rendering contains %q: %s", label, how, c, s)
			}
		}
	}
}

// TestCanaryNoSecretsInErrors drives every operation into provider
// failures whose bodies carry canary text, plus local, network, malformed
// and stream failures, and asserts that no canary is ever rendered.
func TestCanaryNoSecretsInErrors(t *testing.T) {
	t.Parallel()
	e := startEmulator(t, canaryKey)
	c := e.client
	ops := map[string]func(ctx context.Context) error{
		"inspect":      func(ctx context.Context) error { _, err := c.InspectKey(ctx); return err },
		"list inboxes": func(ctx context.Context) error { _, err := c.ListInboxes(ctx, ListParams{Limit: 100}); return err },
		"create inbox": func(ctx context.Context) error {
			_, err := c.CreateInbox(ctx, CreateInboxRequest{Username: "canary-inbox-91c2", ClientID: "paperclip-x"})
			return err
		},
		"get inbox":    func(ctx context.Context) error { _, err := c.GetInbox(ctx, canaryInbox); return err },
		"list domains": func(ctx context.Context) error { _, err := c.ListDomains(ctx, ListParams{}); return err },
		"get domain":   func(ctx context.Context) error { _, err := c.GetDomain(ctx, "canary-inbox.example"); return err },
		"create key": func(ctx context.Context) error {
			_, err := c.CreateInboxAPIKey(ctx, canaryInbox, CreateAPIKeyRequest{Name: "x"})
			return err
		},
		"delete key": func(ctx context.Context) error { return c.DeleteInboxAPIKey(ctx, canaryInbox, "canary-message-key") },
		"create webhook": func(ctx context.Context) error {
			_, err := c.CreateInboxWebhook(ctx, canaryInbox, CreateWebhookRequest{URL: "https://x/y", EventTypes: ChannelEventTypes()})
			return err
		},
		"list webhooks": func(ctx context.Context) error {
			_, err := c.ListInboxWebhooks(ctx, canaryInbox, ListParams{})
			return err
		},
		"delete webhook": func(ctx context.Context) error { return c.DeleteInboxWebhook(ctx, canaryInbox, "ep") },
		"list messages": func(ctx context.Context) error {
			_, err := c.ListMessages(ctx, canaryInbox, ListMessagesParams{PageToken: "canary-message"})
			return err
		},
		"get message": func(ctx context.Context) error { _, err := c.GetMessage(ctx, canaryInbox, canaryMsgID); return err },
		"get thread": func(ctx context.Context) error {
			_, err := c.GetThread(ctx, canaryInbox, "canary-message", ThreadParams{})
			return err
		},
		"send": func(ctx context.Context) error {
			_, err := c.SendMessage(ctx, canaryInbox, SendMessageRequest{To: []string{"canary-message@example.com"}, Text: canaryMessage}, "k")
			return err
		},
		"reply": func(ctx context.Context) error {
			_, err := c.ReplyToMessage(ctx, canaryInbox, canaryMsgID, ReplyRequest{Text: "x"}, "k")
			return err
		},
		"reply all": func(ctx context.Context) error {
			_, err := c.ReplyAllToMessage(ctx, canaryInbox, canaryMsgID, ReplyAllRequest{Text: "x"}, "k")
			return err
		},
		"attachment": func(ctx context.Context) error {
			_, err := c.GetAttachment(ctx, canaryInbox, canaryMsgID, "canary-message")
			return err
		},
	}
	providerBody := map[string]any{"name": "ForbiddenError", "code": CodeMissingPermission, "message": canaryMessage + " " + canaryInbox + " " + canaryKey,
		"fix": canaryFix, "docs": canaryDocs}
	for _, status := range []int{400, 401, 403, 404, 409, 422, 429, 500, 503} {
		e.fault(map[string]any{"match": map[string]any{}, "status": status, "body": providerBody})
		for name, op := range ops {
			assertNoCanary(t, fmt.Sprintf("%s %d", name, status), op(testContext(t)))
		}
		e.clearFaults()
	}

	// Plain-text provider bodies and malformed 2xx bodies.
	e.fault(map[string]any{"match": map[string]any{}, "status": 403, "body": canaryMessage + " " + canaryKey})
	assertNoCanary(t, "plain text", ops["get message"](testContext(t)))
	e.clearFaults()
	for i, body := range []string{
		`{"inbox_id":"` + canaryInbox + `","thread_id":"t","message_id":"` + canaryMsgID + `","timestamp":"` + canaryMessage + `"}`,
		`{"inbox_id":"` + canaryInbox + `","to":"` + canaryMessage + `"}`,
		`{"inbox_id":"` + canaryInbox + `"`,
	} {
		e.fault(map[string]any{"match": map[string]any{}, "status": 200, "body": body})
		assertNoCanary(t, fmt.Sprintf("malformed 2xx %d", i), ops["get message"](testContext(t)))
		e.clearFaults()
	}

	// Local argument errors quote nothing.
	assertNoCanary(t, "bad idempotency key", func() error {
		_, err := c.SendMessage(testContext(t), canaryInbox, SendMessageRequest{}, canaryKey+" x")
		return err
	}())
	assertNoCanary(t, "bad key", func() error {
		_, err := c.WithAPIKey(canaryKey+"\n").GetInbox(testContext(t), canaryInbox)
		return err
	}())

	// WebSocket: handshake with an unknown canary key, and an invalid URL
	// carrying the key.
	wsURL := "ws" + strings.TrimPrefix(e.base, "http") + "/v0"
	_, err := Dial(testContext(t), wsURL, canaryKey+"_unknown", []string{canaryInbox}, nil)
	assertNoCanary(t, "ws handshake", err)
	_, err = Dial(testContext(t), wsURL+"?api_key="+canaryKey, canaryKey, nil, nil)
	assertNoCanary(t, "ws url", err)
	_, err = ValidateAPIBaseURL("https://" + canaryKey + "@api.agentmail.to/v0")
	assertNoCanary(t, "base url", err)
	_, err = NewWebhookVerifier("whsec_" + canaryKey + "!")
	assertNoCanary(t, "webhook secret", err)
	_, err = NormalizeEvent([]byte(`{"type":"message_received","message":{"inbox_id":"` + canaryInbox + `","subject":"` + canaryMessage + `"}}`))
	assertNoCanary(t, "normalize", err)

	// Network failure: the request URL (with the inbox id) is not quoted.
	_ = e.srv.Close()
	fresh, err := New(Options{BaseURL: e.base + "/v0", APIKey: canaryKey})
	if err != nil {
		t.Fatal(err)
	}
	_, err = fresh.GetMessage(testContext(t), canaryInbox, canaryMsgID)
	assertNoCanary(t, "network", err)
	_, err = fresh.DownloadAttachment(testContext(t), e.base+"/_files/"+canaryKey, 10)
	assertNoCanary(t, "download network", err)
	_, err = fresh.DownloadAttachment(testContext(t), "ftp://"+canaryKey, 10)
	assertNoCanary(t, "download url", err)
}

// TestCanaryDescribeDropsOuterContext: Describe returns only this package's
// safe string even when a caller wrapped it with unsafe context.
func TestCanaryDescribeDropsOuterContext(t *testing.T) {
	t.Parallel()
	inner := &Error{Status: http.StatusForbidden, Operation: OpGetInbox, Code: CodeUnknown}
	wrapped := fmt.Errorf("fetching %s: %w", canaryInbox, inner)
	if got := Describe(wrapped); got != inner.Error() {
		t.Fatalf("Describe = %q", got)
	}
}
