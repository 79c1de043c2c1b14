package emulator

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"

	"github.com/coder/websocket"
)

// hub tracks live WebSocket subscribers. Its mutex is always taken after
// Server.mu (publishLocked runs under Server.mu), never before.
type hub struct {
	mu   sync.Mutex
	subs map[*subscriber]struct{}
}

func newHub() *hub { return &hub{subs: map[*subscriber]struct{}{}} }

// subscriber is one WebSocket connection. Outgoing frames go through an
// unbounded queue drained by a single writer goroutine, so publishing never
// blocks on a slow client and frames keep their order (the subscribed
// acknowledgement always precedes events matching the new filter).
type subscriber struct {
	orgID, podID, inboxID string
	conn                  *websocket.Conn
	// remote is the client's address (host:port), for tests that find
	// which process holds a connection.
	remote string

	mu         sync.Mutex
	subscribed bool
	eventTypes []string
	inboxIDs   []string
	podIDs     []string
	queue      [][]byte
	signal     chan struct{}
}

func (h *hub) add(s *subscriber) {
	h.mu.Lock()
	h.subs[s] = struct{}{}
	h.mu.Unlock()
}

func (h *hub) remove(s *subscriber) {
	h.mu.Lock()
	delete(h.subs, s)
	h.mu.Unlock()
}

func (h *hub) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs)
}

func (h *hub) peers() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]string, 0, len(h.subs))
	for s := range h.subs {
		out = append(out, s.remote)
	}
	return out
}

func (h *hub) publish(ev *event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for sub := range h.subs {
		sub.offer(ev)
	}
}

// dropAll closes every live connection with 1001 (going away) and waits
// for the close handshakes, so callers observe the drop when it returns.
func (h *hub) dropAll() int {
	h.mu.Lock()
	subs := make([]*subscriber, 0, len(h.subs))
	for s := range h.subs {
		subs = append(subs, s)
	}
	h.mu.Unlock()
	var wg sync.WaitGroup
	for _, s := range subs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = s.conn.Close(websocket.StatusGoingAway, "emulator dropped the connection")
		}()
	}
	wg.Wait()
	return len(subs)
}

func (sub *subscriber) enqueue(frame []byte) {
	sub.queue = append(sub.queue, frame)
	select {
	case sub.signal <- struct{}{}:
	default:
	}
}

func (sub *subscriber) offer(ev *event) {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	if !sub.subscribed || !eventWanted(sub.eventTypes, ev.typ) {
		return
	}
	if !scopeMatches(ev, sub.orgID, sub.podID, sub.inboxID, sub.inboxIDs, sub.podIDs) {
		return
	}
	sub.enqueue(ev.payload)
}

func (sub *subscriber) send(v any) {
	b, err := marshalJSON(v)
	if err != nil {
		return
	}
	sub.mu.Lock()
	sub.enqueue(b)
	sub.mu.Unlock()
}

func (sub *subscriber) writeLoop(ctx context.Context, cancel context.CancelFunc) {
	defer cancel()
	for {
		select {
		case <-ctx.Done():
			return
		case <-sub.signal:
		}
		sub.mu.Lock()
		batch := sub.queue
		sub.queue = nil
		sub.mu.Unlock()
		for _, frame := range batch {
			if err := sub.conn.Write(ctx, websocket.MessageText, frame); err != nil {
				return
			}
		}
	}
}

// wsCredential extracts the key from the Authorization header or, when no
// header is sent, the api_key (or legacy auth_token) query parameter.
func wsCredential(r *http.Request) string {
	if h := r.Header.Get("Authorization"); h != "" {
		if k, ok := strings.CutPrefix(h, "Bearer "); ok {
			return strings.TrimSpace(k)
		}
		return ""
	}
	if k := r.URL.Query().Get("api_key"); k != "" {
		return k
	}
	return r.URL.Query().Get("auth_token")
}

type wsError struct {
	Type    string `json:"type"`
	Name    string `json:"name"`
	Message string `json:"message"`
}

type wsSubscribe struct {
	Type       string   `json:"type"`
	EventTypes []string `json:"event_types,omitempty"`
	InboxIDs   []string `json:"inbox_ids,omitempty"`
	PodIDs     []string `json:"pod_ids,omitempty"`
}

// serveWebSocket serves the /v0 WebSocket: authentication on the upgrade
// request, subscribe → subscribed, then event frames.
// The handshake outcome is reported to record before the connection is
// served, since a live connection can last arbitrarily long.
func (s *Server) serveWebSocket(w http.ResponseWriter, r *http.Request, record func(status int)) {
	secret := wsCredential(r)
	s.mu.Lock()
	key := s.state.keyBySecret[secret]
	var k apiKey
	if key != nil {
		key.usedAt = s.state.now()
		k = *key
		k.perms = key.perms // permission maps are never mutated in place
	}
	s.mu.Unlock()
	if key == nil {
		record(http.StatusUnauthorized)
		writeAPIError(w, errUnauthorized("unauthorized", "Websocket initialized with invalid credentials"))
		return
	}
	conn, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		record(http.StatusBadRequest)
		return
	}
	record(http.StatusSwitchingProtocols)
	conn.SetReadLimit(1 << 20)
	sub := &subscriber{orgID: k.orgID, podID: k.podID, inboxID: k.inboxID, conn: conn, remote: r.RemoteAddr,
		signal: make(chan struct{}, 1)}
	s.hub.add(sub)
	defer s.hub.remove(sub)

	// The connection lives until the client leaves, a drop, or Close; a
	// request-scoped context would not cover the hijacked connection.
	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()
	go sub.writeLoop(ctx, cancel)
	defer conn.CloseNow()

	for {
		typ, data, err := conn.Read(ctx)
		if err != nil {
			return
		}
		if typ != websocket.MessageText {
			sub.send(wsError{Type: "error", Name: "ValidationError", Message: "Only text frames are supported"})
			continue
		}
		s.handleFrame(sub, &k, data)
	}
}

func (s *Server) handleFrame(sub *subscriber, k *apiKey, data []byte) {
	var head struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		sub.send(wsError{Type: "error", Name: "ValidationError", Message: "Invalid JSON frame"})
		return
	}
	if head.Type != "subscribe" {
		sub.send(wsError{Type: "error", Name: "ValidationError", Message: "Unknown message type: " + head.Type})
		return
	}
	var req wsSubscribe
	if err := json.Unmarshal(data, &req); err != nil {
		sub.send(wsError{Type: "error", Name: "ValidationError", Message: "Invalid subscribe frame: " + err.Error()})
		return
	}
	if len(req.EventTypes) == 0 {
		req.EventTypes = nil // an empty list means all standard types
	}
	for _, t := range req.EventTypes {
		if !knownEventTypes[t] && t != evDelayed {
			sub.send(wsError{Type: "error", Name: "ValidationError", Message: "Unknown event type: " + t})
			return
		}
		if label := filteredEventLabel[t]; label != "" && !canSeeLabel(k, label) {
			sub.send(wsError{Type: "error", Name: "ForbiddenError", Message: hiddenLabelPermission[label] + " is forbidden"})
			return
		}
	}
	if len(req.InboxIDs) > 10 || len(req.PodIDs) > 10 {
		sub.send(wsError{Type: "error", Name: "ValidationError", Message: "At most 10 inbox_ids and 10 pod_ids"})
		return
	}
	s.mu.Lock()
	for i, id := range req.InboxIDs {
		ib := s.state.lookupInbox(id)
		if ib == nil || !inboxInScope(k, ib) {
			s.mu.Unlock()
			sub.send(wsError{Type: "error", Name: "NotFoundError", Message: "Inbox not found: " + id})
			return
		}
		req.InboxIDs[i] = ib.id
	}
	for _, id := range req.PodIDs {
		if p := s.state.pods[id]; p == nil || !podInScope(k, p) || k.inboxID != "" {
			s.mu.Unlock()
			sub.send(wsError{Type: "error", Name: "NotFoundError", Message: "Pod not found: " + id})
			return
		}
	}
	s.mu.Unlock()

	// A new subscribe replaces the previous filter.
	ack := wsSubscribe{Type: "subscribed", EventTypes: req.EventTypes, InboxIDs: req.InboxIDs, PodIDs: req.PodIDs}
	b, _ := marshalJSON(ack)
	sub.mu.Lock()
	sub.subscribed = true
	sub.eventTypes = req.EventTypes
	sub.inboxIDs = req.InboxIDs
	sub.podIDs = req.PodIDs
	sub.enqueue(b)
	sub.mu.Unlock()
}
