package emulator

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Event types of the AgentMail API (EventType enum of the SDK).
const (
	evReceived        = "message.received"
	evReceivedSpam    = "message.received.spam"
	evReceivedBlocked = "message.received.blocked"
	evReceivedUnauth  = "message.received.unauthenticated"
	evSent            = "message.sent"
	evDelivered       = "message.delivered"
	evBounced         = "message.bounced"
	evComplained      = "message.complained"
	evRejected        = "message.rejected"
	evOpened          = "message.opened"
	evDomainVerified  = "domain.verified"
	// evDelayed is an emulator extension for the "delayed" receipt; its
	// payload shape is not documented by AgentMail.
	evDelayed = "message.delayed"
)

// knownEventTypes are accepted in webhook and subscription filters.
var knownEventTypes = map[string]bool{
	evReceived: true, evReceivedSpam: true, evReceivedBlocked: true, evReceivedUnauth: true,
	evSent: true, evDelivered: true, evBounced: true, evComplained: true, evRejected: true,
	evOpened: true, evDomainVerified: true,
}

// filteredEventLabel maps the filtered received variants to the label (and
// thus permission) they require; they are only delivered when listed.
var filteredEventLabel = map[string]string{
	evReceivedSpam:    "spam",
	evReceivedBlocked: "blocked",
	evReceivedUnauth:  "unauthenticated",
}

// event is one provider event ready for fan-out.
type event struct {
	orgID, podID, inboxID string
	typ, id               string
	payload               []byte
}

// eventWanted reports whether an event of type typ passes an event_types
// filter; a nil filter means all standard types (no filtered variants, no
// extensions).
func eventWanted(filter []string, typ string) bool {
	if filter == nil {
		return knownEventTypes[typ] && filteredEventLabel[typ] == ""
	}
	for _, t := range filter {
		if t == typ {
			return true
		}
	}
	return false
}

// scopeMatches reports whether the event lies inside a scope and passes
// inbox/pod id filters (either list matching suffices when both are set).
func scopeMatches(ev *event, orgID, podID, inboxID string, inboxIDs, podIDs []string) bool {
	if ev.orgID != orgID {
		return false
	}
	if podID != "" && ev.podID != podID {
		return false
	}
	if inboxID != "" && !strings.EqualFold(ev.inboxID, inboxID) {
		return false
	}
	if len(inboxIDs) == 0 && len(podIDs) == 0 {
		return true
	}
	for _, id := range inboxIDs {
		if ev.inboxID != "" && strings.EqualFold(id, ev.inboxID) {
			return true
		}
	}
	for _, id := range podIDs {
		if ev.podID != "" && id == ev.podID {
			return true
		}
	}
	return false
}

// maxPayloadBytes is the webhook payload cap; above it message text and
// html are omitted, as documented.
const maxPayloadBytes = 1 << 20

func (s *Server) newEvent(orgID, podID, inboxID, typ string, body map[string]any) *event {
	id := "evt_" + randomAlnum(24)
	env := map[string]any{"type": "event", "event_type": typ, "event_id": id}
	for k, v := range body {
		env[k] = v
	}
	b, err := marshalJSON(env)
	if err != nil {
		s.log.Error("encode event", "type", typ, "err", err)
		return nil
	}
	return &event{orgID: orgID, podID: podID, inboxID: inboxID, typ: typ, id: id, payload: b}
}

// receivedEventLocked builds message.received[.variant] for m.
func (s *Server) receivedEventLocked(ib *inbox, m *message, typ string) *event {
	th := s.state.threads[m.threadID]
	mw := messageWire(m, true)
	var tw wireThreadItem
	if th != nil {
		tw = threadItemWire(th, th.messages)
	}
	ev := s.newEvent(ib.orgID, ib.podID, ib.id, typ, map[string]any{"message": mw, "thread": tw})
	if ev != nil && len(ev.payload) > maxPayloadBytes {
		mw.Text, mw.HTML, mw.ExtractedText, mw.ExtractedHTML = "", "", "", ""
		ev = s.newEvent(ib.orgID, ib.podID, ib.id, typ, map[string]any{"message": mw, "thread": tw})
	}
	return ev
}

// receiptEventLocked builds a send receipt (message.sent, .delivered, ...).
func (s *Server) receiptEventLocked(ib *inbox, m *message, typ string, recipients []string, at time.Time) *event {
	base := map[string]any{
		"inbox_id": m.inboxID, "thread_id": m.threadID, "message_id": m.messageID, "timestamp": ts(at),
	}
	if recipients == nil {
		recipients = []string{}
	}
	var key string
	switch typ {
	case evSent:
		key = "send"
		base["recipients"] = recipients
	case evDelivered:
		key = "delivery"
		base["recipients"] = recipients
	case evDelayed:
		key = "delay"
		base["recipients"] = recipients
	case evBounced:
		key = "bounce"
		base["type"], base["sub_type"] = "Permanent", "General"
		rs := make([]map[string]string, 0, len(recipients))
		for _, r := range recipients {
			rs = append(rs, map[string]string{"address": r, "status": "bounced"})
		}
		base["recipients"] = rs
	case evComplained:
		key = "complaint"
		base["type"], base["sub_type"] = "abuse", "spam"
		base["recipients"] = recipients
	case evRejected:
		key = "reject"
		base["reason"] = "Recipient rejected by the receiving server"
	default:
		return nil
	}
	return s.newEvent(ib.orgID, ib.podID, ib.id, typ, map[string]any{key: base})
}

// publishLocked fans an event out to WebSocket subscribers and webhooks.
// It runs with s.mu held so that events leave in state-change order; it
// only enqueues, never blocks on a network peer.
func (s *Server) publishLocked(ev *event) {
	if ev == nil {
		return
	}
	s.hub.publish(ev)
	for _, wh := range s.state.webhooks {
		if !wh.enabled || !eventWanted(wh.eventTypes, ev.typ) {
			continue
		}
		if !scopeMatches(ev, wh.orgID, wh.scopePodID, wh.scopeInboxID, wh.inboxIDs, wh.podIDs) {
			continue
		}
		s.scheduleWebhookLocked(wh, ev)
	}
}

// WebhookAttempt is one recorded webhook delivery attempt.
type WebhookAttempt struct {
	WebhookID  string    `json:"webhook_id"`
	URL        string    `json:"url"`
	SvixID     string    `json:"svix_id"`
	EventID    string    `json:"event_id"`
	EventType  string    `json:"event_type"`
	Attempt    int       `json:"attempt"`
	StatusCode int       `json:"status_code,omitempty"`
	Error      string    `json:"error,omitempty"`
	Succeeded  bool      `json:"succeeded"`
	At         time.Time `json:"at"`
}

// defaultRetryDelays is the webhook schedule: an immediate attempt, then
// exponential backoff (Svix itself uses 5 s, 5 min, 30 min, ...; the
// emulator compresses it so tests finish quickly).
func defaultRetryDelays() []time.Duration {
	return []time.Duration{0, 250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second}
}

// newWebhookClient returns the client of webhook deliveries: a 15 s
// timeout and no redirects, like Svix.
func newWebhookClient(rt http.RoundTripper) *http.Client {
	if rt == nil {
		rt = http.DefaultTransport.(*http.Transport).Clone()
	}
	return &http.Client{
		Transport: rt,
		Timeout:   15 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

// signSvix returns the svix-signature value for a payload.
func signSvix(secret, msgID string, unix int64, body []byte) (string, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		return "", fmt.Errorf("decode webhook secret: %w", err)
	}
	mac := hmac.New(sha256.New, key)
	fmt.Fprintf(mac, "%s.%d.", msgID, unix)
	mac.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil)), nil
}

func (s *Server) scheduleWebhookLocked(wh *webhook, ev *event) {
	svixID := "msg_" + randomAlnum(27)
	whID, url, secret := wh.id, wh.url, wh.secret
	headers := make(map[string]string, len(wh.headers))
	for k, v := range wh.headers {
		headers[k] = v
	}
	delays := append([]time.Duration(nil), s.state.retryDelays...)
	s.goBackground(func(ctx context.Context) {
		for i, d := range delays {
			if !sleepCtx(ctx, d) {
				return
			}
			s.mu.Lock()
			_, alive := s.state.webhooks[whID]
			s.mu.Unlock()
			if !alive {
				return
			}
			code, err := deliverWebhook(ctx, s.webhooks, url, secret, svixID, headers, ev.payload)
			ok := err == nil && code >= 200 && code < 300
			att := WebhookAttempt{WebhookID: whID, URL: url, SvixID: svixID, EventID: ev.id, EventType: ev.typ, Attempt: i + 1, StatusCode: code, Succeeded: ok, At: time.Now().UTC()}
			if err != nil {
				att.Error = err.Error()
			}
			s.mu.Lock()
			s.state.deliveries = appendBounded(s.state.deliveries, att)
			s.mu.Unlock()
			if ok {
				return
			}
		}
	})
}

func deliverWebhook(ctx context.Context, client *http.Client, url, secret, svixID string, headers map[string]string, body []byte) (int, error) {
	now := time.Now().Unix()
	sig, err := signSvix(secret, svixID, now, body)
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, fmt.Errorf("build webhook request: %w", err)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "Svix-Webhooks/1.81.0 (agentmail-emulator)")
	req.Header.Set("svix-id", svixID)
	req.Header.Set("svix-timestamp", strconv.FormatInt(now, 10))
	req.Header.Set("svix-signature", sig)
	resp, err := client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("post webhook: %w", err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}

func appendBounded[T any](list []T, v T) []T {
	if len(list) >= maxRecorded {
		list = append(list[:0], list[len(list)-maxRecorded/2:]...)
	}
	return append(list, v)
}
