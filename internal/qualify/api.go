package qualify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/paperclipai/paperclipai/internal/apiclient"
	"github.com/paperclipai/paperclipai/internal/domain"
)

// APIError is an error answer of the emulator's control API: the status and the server's own message (servers never put
// credentials in messages).
type APIError struct {
	Method, Path string
	Status       int
	Message      string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("%s %s: HTTP %d: %s", e.Method, e.Path, e.Status, e.Message)
}

// statusOf returns the HTTP status of an APIError (the emulator's) or an
// apiclient.Error (the server's), or 0.
func statusOf(err error) int {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae.Status
	}
	var ce *apiclient.Error
	if errors.As(err, &ce) {
		return ce.Status
	}
	return 0
}

// callTimeout bounds one API call.
const callTimeout = 60 * time.Second

// jsonClient calls a JSON HTTP API under one base URL.
type jsonClient struct {
	base  string
	token string
	http  *http.Client
}

// call sends body (JSON-encoded when not nil) and decodes a 2xx answer
// into out (when not nil).
func (c *jsonClient) call(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("encode %s %s: %w", method, path, err)
		}
		rd = bytes.NewReader(raw)
	}
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		// The URL error names the URL, never a header.
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return fmt.Errorf("%s %s: read answer: %w", method, path, err)
	}
	if resp.StatusCode >= 400 {
		var e struct {
			Error   string `json:"error"`
			Message string `json:"message"`
		}
		msg := strings.TrimSpace(string(raw))
		if json.Unmarshal(raw, &e) == nil && (e.Error != "" || e.Message != "") {
			msg = e.Error + e.Message
		}
		if len(msg) > 300 {
			msg = msg[:300] + "…"
		}
		return &APIError{Method: method, Path: path, Status: resp.StatusCode, Message: msg}
	}
	if out == nil || len(bytes.TrimSpace(raw)) == 0 {
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("%s %s: decode answer: %w", method, path, err)
	}
	return nil
}

// newAPI is the Paperclip API client of a run: the server's /api with the
// operator's board key, each call bounded like the emulator's.
func newAPI(o Options) *apiclient.Client {
	hc := *o.HTTPClient
	if hc.Timeout == 0 {
		hc.Timeout = callTimeout
	}
	return apiclient.New(apiclient.Options{BaseURL: strings.TrimRight(o.Server, "/") + "/api", Token: o.Token, HTTP: &hc})
}

// address is an inbox's address ("" before setup chose one).
func address(ep domain.EmailEndpointSummary) string {
	if ep.Address == nil {
		return ""
	}
	return *ep.Address
}

// emulatorControl drives the AgentMail emulator's control API.
type emulatorControl struct{ c *jsonClient }

type deliverRequest struct {
	From    string `json:"from"`
	Subject string `json:"subject"`
	Text    string `json:"text"`
}

type deliverResult struct {
	MessageID string `json:"message_id"`
	ThreadID  string `json:"thread_id"`
}

func (e *emulatorControl) deliver(ctx context.Context, inbox string, req deliverRequest) (deliverResult, error) {
	var out deliverResult
	err := e.c.call(ctx, "POST", "/_emulator/inboxes/"+url.PathEscape(inbox)+"/deliver", req, &out)
	return out, err
}

func (e *emulatorControl) subscribed(ctx context.Context, inbox string) (int, error) {
	var out struct {
		Subscribed *int `json:"subscribed"`
	}
	if err := e.c.call(ctx, "GET", "/_emulator/websockets?inbox_id="+url.QueryEscape(inbox), nil, &out); err != nil {
		return 0, err
	}
	if out.Subscribed == nil {
		return 0, errors.New("the emulator does not report subscriptions per inbox")
	}
	return *out.Subscribed, nil
}

func (e *emulatorControl) dropSockets(ctx context.Context) error {
	return e.c.call(ctx, "POST", "/_emulator/websockets/drop", nil, nil)
}

// refuseSockets makes the emulator refuse WebSocket handshakes until the
// returned fault is removed; it never touches other faults.
func (e *emulatorControl) refuseSockets(ctx context.Context) (string, error) {
	var out struct {
		ID string `json:"id"`
	}
	err := e.c.call(ctx, "POST", "/_emulator/faults", map[string]any{
		"match": map[string]any{"operation": "websocket"}, "status": 503, "code": "service_unavailable"}, &out)
	return out.ID, err
}

func (e *emulatorControl) removeFault(ctx context.Context, id string) error {
	return e.c.call(ctx, "DELETE", "/_emulator/faults/"+url.PathEscape(id), nil, nil)
}

type outboxMessage struct {
	MessageID string `json:"message_id"`
	ThreadID  string `json:"thread_id"`
	InReplyTo string `json:"in_reply_to"`
}

func (e *emulatorControl) outbox(ctx context.Context, to string) ([]outboxMessage, error) {
	var out struct {
		Messages []outboxMessage `json:"messages"`
	}
	err := e.c.call(ctx, "GET", "/_emulator/outbox?to="+url.QueryEscape(to), nil, &out)
	return out.Messages, err
}
