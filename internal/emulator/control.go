package emulator

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Sentinel errors of the Go control API.
var (
	// ErrNotFound reports that a control operation named an unknown object.
	ErrNotFound = errors.New("not found")
	// ErrNoSuchInbox reports that no hosted inbox has the given address.
	ErrNoSuchInbox = errors.New("no such inbox")
)

// RecordedRequest is one provider API request as seen by the emulator. The
// Authorization header is never recorded.
type RecordedRequest struct {
	Method         string          `json:"method"`
	Path           string          `json:"path"`
	Query          string          `json:"query"`
	IdempotencyKey *string         `json:"idempotency_key"`
	Body           json.RawMessage `json:"body"`
	Status         int             `json:"status"`
	At             time.Time       `json:"at"`
}

// maxRecordedBody bounds the stored copy of each request body.
const maxRecordedBody = 64 << 10

func (s *Server) recordRequest(r *http.Request, rawPath string, body []byte, idemKey string, status int) {
	rr := RecordedRequest{Method: r.Method, Path: rawPath, Query: r.URL.RawQuery, Status: status, At: time.Now().UTC()}
	if _, ok := r.Header["Idempotency-Key"]; ok {
		k := idemKey
		rr.IdempotencyKey = &k
	}
	switch {
	case len(body) == 0:
		rr.Body = json.RawMessage("null")
	case len(body) <= maxRecordedBody && json.Valid(body):
		rr.Body = append(json.RawMessage(nil), body...)
	default:
		if len(body) > maxRecordedBody {
			body = body[:maxRecordedBody]
		}
		b, _ := json.Marshal(string(body))
		rr.Body = b
	}
	s.requestCount.Add(1)
	s.mu.Lock()
	s.state.requests = appendBounded(s.state.requests, rr)
	s.mu.Unlock()
}

// RequestCount returns the number of provider API requests served since
// start (the recorded list is bounded; this count is not). Benchmarks use
// it for the provider request rate.
func (s *Server) RequestCount() int64 { return s.requestCount.Load() }

// Requests returns the recorded provider requests whose escaped or decoded
// path starts with pathPrefix ("" for all), oldest first.
func (s *Server) Requests(pathPrefix string) []RecordedRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []RecordedRequest{}
	for _, rr := range s.state.requests {
		if pathPrefix == "" || strings.HasPrefix(rr.Path, pathPrefix) || strings.HasPrefix(unescapeLoose(rr.Path), pathPrefix) {
			out = append(out, rr)
		}
	}
	return out
}

func unescapeLoose(p string) string {
	segs, _, err := splitPath(p)
	if err != nil {
		return p
	}
	return "/" + strings.Join(segs, "/")
}

// CreateOrganization creates an organization with a default pod and one
// unrestricted organization-scoped API key.
func (s *Server) CreateOrganization(name string) (orgID, apiKey string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	org := s.createOrgLocked(name)
	k := s.addKeyLocked(org.id, "", "", "emulator", "", nil)
	s.markDirty()
	return org.id, k.secret
}

// Outbox returns mail sent to addresses the emulator does not host,
// optionally filtered by a recipient address and the sending inbox.
func (s *Server) Outbox(to, inboxID string) []OutboxMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []OutboxMessage{}
	for _, e := range s.state.outbox {
		if inboxID != "" && !strings.EqualFold(e.msg.InboxID, inboxID) {
			continue
		}
		if to != "" {
			found := false
			for _, r := range append(append(append([]string{}, e.msg.To...), e.msg.Cc...), e.msg.Bcc...) {
				if strings.EqualFold(addrOnly(r), addrOnly(to)) {
					found = true
				}
			}
			if !found {
				continue
			}
		}
		out = append(out, e.msg)
	}
	return out
}

// controlEventTypes maps POST /_emulator/messages/{id}/events types.
var controlEventTypes = map[string]string{
	"delivered": evDelivered, "bounced": evBounced, "complained": evComplained,
	"rejected": evRejected, "delayed": evDelayed,
}

// EmitMessageEvent emits a delivery receipt (delivered, bounced,
// complained, rejected or delayed) for a sent message, labelling it.
// recipients defaults to all of the message's recipients.
func (s *Server) EmitMessageEvent(messageID, typ string, recipients ...string) error {
	evType, ok := controlEventTypes[typ]
	if !ok {
		return fmt.Errorf("emit message event: unknown type %q", typ)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	id := normalizeMsgID(messageID)
	var m *message
	for k, cand := range s.state.messages {
		if k.messageID == id && cand.sent {
			m = cand
			break
		}
	}
	if m == nil {
		return fmt.Errorf("emit message event %s: %w", messageID, ErrNotFound)
	}
	if len(recipients) == 0 {
		for _, r := range append(append(append([]string{}, m.to...), m.cc...), m.bcc...) {
			recipients = append(recipients, addrOnly(r))
		}
	}
	s.markDirty()
	s.emitReceiptLocked(m.inboxID, m.messageID, evType, recipients)
	return nil
}

// DropWebSockets closes every live WebSocket and returns how many.
func (s *Server) DropWebSockets() int { return s.hub.dropAll() }

// WebSocketPeers returns the client address (host:port) of every live
// WebSocket connection, so a test can tell which process holds one.
func (s *Server) WebSocketPeers() []string { return s.hub.peers() }

// WebSocketCount returns the number of live WebSocket connections.
func (s *Server) WebSocketCount() int { return s.hub.count() }

// SubscribedCount returns the number of live WebSockets whose subscription
// would receive a message.received event of the inbox with address
// inboxID: subscribed, in the key's scope, and not filtered away by
// inbox_ids/pod_ids. It lets a client wait until a live connection is
// really listening, which the connection count alone does not say.
func (s *Server) SubscribedCount(inboxID string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	ib := s.state.lookupInbox(inboxID)
	if ib == nil {
		return 0
	}
	ev := &event{orgID: ib.orgID, podID: ib.podID, inboxID: ib.id, typ: evReceived}
	s.hub.mu.Lock()
	defer s.hub.mu.Unlock()
	n := 0
	for sub := range s.hub.subs {
		sub.mu.Lock()
		if sub.subscribed && eventWanted(sub.eventTypes, ev.typ) &&
			scopeMatches(ev, sub.orgID, sub.podID, sub.inboxID, sub.inboxIDs, sub.podIDs) {
			n++
		}
		sub.mu.Unlock()
	}
	return n
}

// VerifyDomain marks a custom domain VERIFIED and emits domain.verified.
func (s *Server) VerifyDomain(name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.markDirty()
	_, err := s.verifyDomainLocked(name)
	return err
}

// SetBlockList replaces the inbox's receive block list (its inbox-scoped
// receive/block entries); entries are addresses or bare domains. Mail
// from a blocked sender gets the blocked label and fires
// message.received.blocked.
func (s *Server) SetBlockList(inboxID string, entries []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	ib := s.state.lookupInbox(inboxID)
	if ib == nil {
		return fmt.Errorf("set block list: %w: %s", ErrNoSuchInbox, inboxID)
	}
	s.markDirty()
	s.setInboxBlockListLocked(ib, entries)
	return nil
}

func (s *Server) setInboxBlockListLocked(ib *inbox, entries []string) {
	for k, e := range s.state.lists {
		if e.inboxID == ib.id && e.direction == "receive" && e.listType == "block" {
			delete(s.state.lists, k)
		}
	}
	for _, v := range entries {
		entry, typ, err := normalizeListEntry(v)
		if err != nil {
			continue
		}
		e := &listEntry{orgID: ib.orgID, podID: ib.podID, inboxID: ib.id, direction: "receive", listType: "block",
			entry: entry, entryType: typ, seq: s.state.nextSeq(), createdAt: s.state.now()}
		s.state.lists[e.key()] = e
	}
}

// WebhookAttempts returns recorded webhook delivery attempts, optionally
// for one webhook.
func (s *Server) WebhookAttempts(webhookID string) []WebhookAttempt {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []WebhookAttempt{}
	for _, a := range s.state.deliveries {
		if webhookID == "" || a.WebhookID == webhookID {
			out = append(out, a)
		}
	}
	return out
}

// SetDeliveryDelay changes the delay before delivery receipts (0 = none).
func (s *Server) SetDeliveryDelay(d time.Duration) {
	s.mu.Lock()
	s.state.deliveryDelay = max(d, 0)
	s.mu.Unlock()
}

// SetMaxPageSize caps every list page at n items (n <= 0 restores the
// default of 100), so tests can exercise pagination with a few messages.
func (s *Server) SetMaxPageSize(n int) {
	s.pageMax.Store(int64(max(n, 0)))
}

// SetClockOffset shifts the emulator's clock by d: messages received while
// it is set get created_at = now + d. A negative offset models mail the
// provider accepted earlier but made visible only now (a late receipt).
func (s *Server) SetClockOffset(d time.Duration) {
	s.mu.Lock()
	s.state.clockOffset = d
	s.mu.Unlock()
}

// SetWebhookRetryDelays sets the webhook attempt schedule: one attempt per
// entry, each after waiting that long. An empty schedule restores the
// default.
func (s *Server) SetWebhookRetryDelays(delays []time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(delays) == 0 {
		s.state.retryDelays = defaultRetryDelays()
		return
	}
	s.state.retryDelays = append([]time.Duration(nil), delays...)
}

// DeliverRaw ingests a raw RFC 5322 message for the given recipient
// inboxes, exactly as the SMTP listener does.
func (s *Server) DeliverRaw(recipients []string, raw []byte) ([]DeliverResult, error) {
	in, err := parseMIME(raw)
	if err != nil {
		return nil, fmt.Errorf("deliver raw: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []DeliverResult
	for _, rcpt := range recipients {
		ib := s.state.lookupInbox(addrOnly(rcpt))
		if ib == nil {
			return out, fmt.Errorf("deliver raw: %w: %s", ErrNoSuchInbox, rcpt)
		}
		cp := *in
		cp.headers = copyHeaders(in.headers)
		cp.attachments = nil
		for _, a := range in.attachments {
			ac := *a
			ac.id = "att_" + randomAlnum(20)
			cp.attachments = append(cp.attachments, &ac)
		}
		m := s.receiveLocked(ib, &cp)
		out = append(out, DeliverResult{MessageID: m.messageID, ThreadID: m.threadID})
	}
	return out, nil
}

// controlRoutes serves the emulator's own control API under /_emulator/.
func (s *Server) controlRoutes() http.Handler {
	mux := http.NewServeMux()
	fail := func(w http.ResponseWriter, status int, code, msg string) {
		writeJSON(w, status, &apiError{Name: errorNameForStatus(status), Code: code, Message: msg})
	}
	decode := func(w http.ResponseWriter, r *http.Request, v any) bool {
		b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
		if err != nil {
			fail(w, http.StatusBadRequest, "validation_error", "read body: "+err.Error())
			return false
		}
		if len(strings.TrimSpace(string(b))) == 0 {
			return true
		}
		dec := json.NewDecoder(strings.NewReader(string(b)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(v); err != nil {
			fail(w, http.StatusBadRequest, "validation_error", "invalid body: "+err.Error())
			return false
		}
		return true
	}
	notFoundOr := func(w http.ResponseWriter, err error) {
		if errors.Is(err, ErrNotFound) || errors.Is(err, ErrNoSuchInbox) {
			fail(w, http.StatusNotFound, "not_found", err.Error())
			return
		}
		fail(w, http.StatusBadRequest, "validation_error", err.Error())
	}

	mux.HandleFunc("GET /_emulator/health", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "url": s.URL(), "smtp": s.SMTPAddr()})
	})
	mux.HandleFunc("POST /_emulator/organizations", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Name string `json:"name"`
		}
		if !decode(w, r, &req) {
			return
		}
		orgID, key := s.CreateOrganization(req.Name)
		writeJSON(w, http.StatusOK, map[string]string{"organization_id": orgID, "api_key": key})
	})
	mux.HandleFunc("GET /_emulator/inboxes", func(w http.ResponseWriter, r *http.Request) {
		addr := r.URL.Query().Get("address")
		s.mu.Lock()
		out := []map[string]string{}
		for _, ib := range s.state.inboxes {
			if addr == "" || strings.EqualFold(ib.id, addrOnly(addr)) {
				out = append(out, map[string]string{"inbox_id": ib.id, "organization_id": ib.orgID, "pod_id": ib.podID})
			}
		}
		s.mu.Unlock()
		writeJSON(w, http.StatusOK, map[string]any{"inboxes": out})
	})
	mux.HandleFunc("POST /_emulator/inboxes/{inbox_id}/deliver", func(w http.ResponseWriter, r *http.Request) {
		var req DeliverRequest
		if !decode(w, r, &req) {
			return
		}
		res, err := s.Deliver(r.PathValue("inbox_id"), req)
		if err != nil {
			notFoundOr(w, err)
			return
		}
		writeJSON(w, http.StatusOK, res)
	})
	mux.HandleFunc("PUT /_emulator/inboxes/{inbox_id}/block-list", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Entries []string `json:"entries"`
		}
		if !decode(w, r, &req) {
			return
		}
		if err := s.SetBlockList(r.PathValue("inbox_id"), req.Entries); err != nil {
			notFoundOr(w, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"entries": nonNil(req.Entries)})
	})
	mux.HandleFunc("GET /_emulator/outbox", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		writeJSON(w, http.StatusOK, map[string]any{"messages": s.Outbox(q.Get("to"), q.Get("inbox_id"))})
	})
	mux.HandleFunc("DELETE /_emulator/outbox", func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.state.outbox = nil
		s.mu.Unlock()
		writeNoContent(w)
	})
	mux.HandleFunc("POST /_emulator/messages/{message_id}/events", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Type       string   `json:"type"`
			Recipients []string `json:"recipients"`
		}
		if !decode(w, r, &req) {
			return
		}
		if err := s.EmitMessageEvent(r.PathValue("message_id"), req.Type, req.Recipients...); err != nil {
			notFoundOr(w, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"status": "emitted"})
	})
	mux.HandleFunc("POST /_emulator/faults", func(w http.ResponseWriter, r *http.Request) {
		var f Fault
		if !decode(w, r, &f) {
			return
		}
		if f.Status != 0 && (f.Status < 100 || f.Status > 599) {
			fail(w, http.StatusBadRequest, "validation_error", "status must be an HTTP status code")
			return
		}
		if f.Every < 0 || f.Times < 0 {
			fail(w, http.StatusBadRequest, "validation_error", "every and times must not be negative")
			return
		}
		if f.Status == 0 && f.DelayMS == 0 && !f.Stall {
			fail(w, http.StatusBadRequest, "validation_error", "a fault needs status, delay_ms or stall")
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"id": s.AddFault(f)})
	})
	mux.HandleFunc("GET /_emulator/faults", func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		out := make([]Fault, 0, len(s.state.faults))
		for _, f := range s.state.faults {
			out = append(out, *f)
		}
		s.mu.Unlock()
		writeJSON(w, http.StatusOK, map[string]any{"faults": out})
	})
	mux.HandleFunc("DELETE /_emulator/faults", func(w http.ResponseWriter, r *http.Request) {
		s.ClearFaults()
		writeNoContent(w)
	})
	mux.HandleFunc("DELETE /_emulator/faults/{id}", func(w http.ResponseWriter, r *http.Request) {
		if err := s.RemoveFault(r.PathValue("id")); err != nil {
			fail(w, http.StatusNotFound, "not_found", "fault not found")
			return
		}
		writeNoContent(w)
	})
	mux.HandleFunc("POST /_emulator/websockets/drop", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]int{"dropped": s.DropWebSockets()})
	})
	mux.HandleFunc("GET /_emulator/websockets", func(w http.ResponseWriter, r *http.Request) {
		out := map[string]int{"count": s.WebSocketCount()}
		if inbox := r.URL.Query().Get("inbox_id"); inbox != "" {
			out["subscribed"] = s.SubscribedCount(inbox)
		}
		writeJSON(w, http.StatusOK, out)
	})
	mux.HandleFunc("POST /_emulator/domains/{domain}/verify", func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		d, err := s.verifyDomainLocked(r.PathValue("domain"))
		var out wireDomain
		if err == nil {
			out = domainWire(d)
		}
		s.mu.Unlock()
		if err != nil {
			notFoundOr(w, err)
			return
		}
		writeJSON(w, http.StatusOK, out)
	})
	mux.HandleFunc("GET /_emulator/requests", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"requests": s.Requests(r.URL.Query().Get("path_prefix"))})
	})
	mux.HandleFunc("DELETE /_emulator/requests", func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.state.requests = nil
		s.mu.Unlock()
		writeNoContent(w)
	})
	mux.HandleFunc("GET /_emulator/webhook-deliveries", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"deliveries": s.WebhookAttempts(r.URL.Query().Get("webhook_id"))})
	})
	mux.HandleFunc("PUT /_emulator/settings", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			DeliveryDelayMS      *int   `json:"delivery_delay_ms"`
			WebhookRetryDelaysMS []int  `json:"webhook_retry_delays_ms"`
			MaxPageSize          *int   `json:"max_page_size"`
			ClockOffsetMS        *int64 `json:"clock_offset_ms"`
		}
		if !decode(w, r, &req) {
			return
		}
		if req.DeliveryDelayMS != nil {
			s.SetDeliveryDelay(time.Duration(*req.DeliveryDelayMS) * time.Millisecond)
		}
		if req.WebhookRetryDelaysMS != nil {
			ds := make([]time.Duration, 0, len(req.WebhookRetryDelaysMS))
			for _, ms := range req.WebhookRetryDelaysMS {
				ds = append(ds, time.Duration(ms)*time.Millisecond)
			}
			s.SetWebhookRetryDelays(ds)
		}
		if req.MaxPageSize != nil {
			s.SetMaxPageSize(*req.MaxPageSize)
		}
		if req.ClockOffsetMS != nil {
			s.SetClockOffset(time.Duration(*req.ClockOffsetMS) * time.Millisecond)
		}
		s.mu.Lock()
		resp := map[string]any{"delivery_delay_ms": s.state.deliveryDelay.Milliseconds(),
			"max_page_size": s.pageMax.Load(), "clock_offset_ms": s.state.clockOffset.Milliseconds()}
		ms := []int64{}
		for _, d := range s.state.retryDelays {
			ms = append(ms, d.Milliseconds())
		}
		resp["webhook_retry_delays_ms"] = ms
		s.mu.Unlock()
		writeJSON(w, http.StatusOK, resp)
	})
	mux.HandleFunc("/_emulator/", func(w http.ResponseWriter, r *http.Request) {
		fail(w, http.StatusNotFound, "not_found", "unknown control endpoint "+r.Method+" "+r.URL.Path)
	})
	return mux
}
