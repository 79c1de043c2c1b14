package agentmail

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
)

// Stream defaults (docs/email-pipeline.md, "The provider client").
const (
	// DefaultStreamReadLimit is the largest accepted frame. message.received
	// events carry full text and HTML bodies, so the library default of
	// 32 KiB is far too small.
	DefaultStreamReadLimit = 64 << 20
	// DefaultSubscribeTimeout bounds the dial, handshake and the wait for
	// the "subscribed" acknowledgement.
	DefaultSubscribeTimeout = 30 * time.Second
	// DefaultPingInterval is the keep-alive ping period.
	DefaultPingInterval = 20 * time.Second
	// DefaultPingTimeout bounds the wait for a pong.
	DefaultPingTimeout = 20 * time.Second
)

// frameBuffer is how many received frames may wait for [Stream.Next]. The
// reader stops reading (and therefore stops answering pings) while the
// buffer is full, so it is generous enough to absorb a slow consumer.
const frameBuffer = 32

// StreamOptions tunes [Dial]. The zero value uses the defaults.
type StreamOptions struct {
	// HTTPClient supplies the transport for the handshake; its redirect
	// policy is replaced (redirects are refused).
	HTTPClient *http.Client
	// EventTypes to subscribe to; nil means [ChannelEventTypes].
	EventTypes []string
	// ReadLimit overrides [DefaultStreamReadLimit] when positive.
	ReadLimit int64
	// SubscribeTimeout overrides [DefaultSubscribeTimeout] when positive.
	SubscribeTimeout time.Duration
	// PingInterval overrides [DefaultPingInterval] when positive.
	PingInterval time.Duration
	// PingTimeout overrides [DefaultPingTimeout] when positive.
	PingTimeout time.Duration
}

// Stream reasons reported in [StreamError.Reason].
const (
	StreamReasonErrorFrame       = "error_frame"
	StreamReasonClosed           = "closed"
	StreamReasonFrameTooLarge    = "frame_too_large"
	StreamReasonPingTimeout      = "ping_timeout"
	StreamReasonReadFailed       = "read_failed"
	StreamReasonSubscribeTimeout = "subscribe_timeout"
	StreamReasonSubscribeFailed  = "subscribe_failed"
	StreamReasonClosedByClient   = "closed_by_client"
)

// StreamError ends a [Stream] (or fails [Dial] after the handshake). It
// matches [ErrStreamClosed]. Its Error string contains only the fixed
// reason, an allowlisted error-frame name and the close status code; the
// provider's error message and close reason text are never included.
type StreamError struct {
	// Reason is one of the StreamReason* constants.
	Reason string
	// Name is the allowlisted name of a provider error frame (for example
	// "ForbiddenError"), "unknown" for an unrecognized one, or "" when the
	// stream did not end with an error frame.
	Name string
	// CloseStatus is the WebSocket close code sent by the peer, or -1.
	CloseStatus int
	err         error
}

// Error returns the log-safe description of the failure.
func (e *StreamError) Error() string {
	s := "AgentMail stream ended [reason=" + e.Reason
	if e.Name != "" {
		s += ", name=" + e.Name
	}
	if e.CloseStatus >= 0 {
		s += fmt.Sprintf(", close_status=%d", e.CloseStatus)
	}
	return s + "]"
}

// Unwrap returns [ErrStreamClosed] and the underlying error, if any.
func (e *StreamError) Unwrap() []error {
	if e.err == nil {
		return []error{ErrStreamClosed}
	}
	return []error{ErrStreamClosed, e.err}
}

// Is makes an error frame named ForbiddenError or UnauthorizedError match
// [ErrForbidden] or [ErrUnauthorized].
func (e *StreamError) Is(target error) bool {
	switch target {
	case ErrForbidden:
		return e.Name == "ForbiddenError"
	case ErrUnauthorized:
		return e.Name == "UnauthorizedError"
	}
	return false
}

var streamErrorNames = map[string]struct{}{
	"ForbiddenError": {}, "UnauthorizedError": {}, "ValidationError": {}, "NotFoundError": {},
	"UnprocessableError": {}, "ConflictError": {}, "IsTakenError": {}, "MessageRejectedError": {},
	"RateLimitError": {}, "InternalServerError": {}, "ServiceUnavailableError": {},
}

// Frame is one event frame received on a [Stream]: the exact JSON text the
// provider sent. Subscription acknowledgements and error frames are handled
// by the stream and never returned as frames.
type Frame struct {
	// Raw is the frame's JSON payload.
	Raw []byte
}

// Event normalizes the frame; see [NormalizeEvent]. A nil event with a nil
// error means the frame is not a channel event and should be ignored.
func (f Frame) Event() (*Event, error) { return NormalizeEvent(f.Raw) }

// Stream is one subscribed AgentMail WebSocket connection. It does not
// reconnect: when it ends, the owner dials again with its own backoff (and
// runs a catch-up scan, because AgentMail does not replay missed events).
// Next must not be called concurrently; Close may be called at any time.
type Stream struct {
	conn   *websocket.Conn
	frames chan []byte
	acked  chan struct{}
	done   chan struct{}
	cancel context.CancelFunc

	ackOnce  sync.Once
	failOnce sync.Once
	err      error // written once before done is closed
}

type subscribeFrame struct {
	Type       string   `json:"type"`
	InboxIDs   []string `json:"inbox_ids,omitempty"`
	EventTypes []string `json:"event_types,omitempty"`
}

// Dial opens the AgentMail WebSocket at wsURL (validated with
// [ValidateWebSocketURL]), authenticating with an "Authorization: Bearer"
// header (the key is never put into the URL), subscribes to inboxIDs for the
// channel event types, and returns once the provider has acknowledged the
// subscription. The whole sequence is bounded by the subscribe timeout and
// by ctx; ctx does not govern the returned stream's lifetime (use
// [Stream.Close]).
//
// A handshake refused with an HTTP status returns an [*Error] with
// operation "websocket" ([IsAuthFailure] is true for 401 and 403 — do not
// redial with the same key); a provider error frame before the
// acknowledgement returns a [*StreamError]; network failures return a
// [*NetworkError].
func Dial(ctx context.Context, wsURL, apiKey string, inboxIDs []string, opts *StreamOptions) (*Stream, error) {
	var o StreamOptions
	if opts != nil {
		o = *opts
	}
	if o.EventTypes == nil {
		o.EventTypes = ChannelEventTypes()
	}
	if o.ReadLimit <= 0 {
		o.ReadLimit = DefaultStreamReadLimit
	}
	if o.SubscribeTimeout <= 0 {
		o.SubscribeTimeout = DefaultSubscribeTimeout
	}
	if o.PingInterval <= 0 {
		o.PingInterval = DefaultPingInterval
	}
	if o.PingTimeout <= 0 {
		o.PingTimeout = DefaultPingTimeout
	}
	u, err := ValidateWebSocketURL(wsURL)
	if err != nil {
		return nil, err
	}
	if !validAPIKey(apiKey) {
		return nil, &ArgumentError{Operation: OpWebSocket, Reason: "API key missing or malformed"}
	}
	for _, id := range inboxIDs {
		if id == "" {
			return nil, &ArgumentError{Operation: OpWebSocket, Reason: "empty inbox id"}
		}
	}

	hc := &http.Client{CheckRedirect: refuseRedirect}
	if o.HTTPClient != nil {
		hc.Transport = o.HTTPClient.Transport
	}

	dialCtx, cancelDial := context.WithTimeout(ctx, o.SubscribeTimeout)
	defer cancelDial()
	var gotConn atomic.Bool
	traced := httptrace.WithClientTrace(dialCtx, &httptrace.ClientTrace{
		GotConn: func(httptrace.GotConnInfo) { gotConn.Store(true) },
	})
	conn, resp, err := websocket.Dial(traced, u.String(), &websocket.DialOptions{
		HTTPClient: hc,
		HTTPHeader: http.Header{"Authorization": {"Bearer " + apiKey}},
	})
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			return nil, handshakeError(resp)
		}
		if dialCtx.Err() != nil && ctx.Err() == nil {
			err = context.DeadlineExceeded
		}
		return nil, newNetworkError(OpWebSocket, err, gotConn.Load())
	}
	conn.SetReadLimit(o.ReadLimit)

	// The stream's lifetime context is independent of ctx, which only bounds
	// Dial. Per coder/websocket semantics, this context ending closes the
	// connection, which is exactly what Close wants.
	life, cancel := context.WithCancel(context.Background())
	s := &Stream{
		conn:   conn,
		frames: make(chan []byte, frameBuffer),
		acked:  make(chan struct{}),
		done:   make(chan struct{}),
		cancel: cancel,
	}
	go s.readLoop(life)

	sub, _ := json.Marshal(subscribeFrame{Type: "subscribe", InboxIDs: inboxIDs, EventTypes: o.EventTypes})
	if err := conn.Write(dialCtx, websocket.MessageText, sub); err != nil {
		s.fail(&StreamError{Reason: StreamReasonSubscribeFailed, CloseStatus: int(websocket.CloseStatus(err)), err: err})
		s.shutdown()
		return nil, s.err
	}
	select {
	case <-s.acked:
	case <-s.done:
	case <-dialCtx.Done():
	}
	// An acknowledgement wins over whatever happened after it (for example
	// an oversized first event): the stream is returned and Next reports
	// the failure in order.
	if !s.isAcked() {
		if s.Err() == nil {
			reason := StreamReasonSubscribeTimeout
			var cause error = context.DeadlineExceeded
			if ctx.Err() != nil {
				reason, cause = StreamReasonClosedByClient, ctx.Err()
			}
			s.fail(&StreamError{Reason: reason, CloseStatus: -1, err: cause})
		}
		s.shutdown()
		return nil, s.err
	}
	s.pingLoop(life, o.PingInterval, o.PingTimeout)
	return s, nil
}

func (s *Stream) isAcked() bool {
	select {
	case <-s.acked:
		return true
	default:
		return false
	}
}

// handshakeError turns a refused upgrade into a provider *Error. The
// library has already buffered at most 1 KiB of the body.
func handshakeError(resp *http.Response) *Error {
	code := CodeUnknown
	if resp.Body != nil {
		b, err := io.ReadAll(io.LimitReader(resp.Body, MaxErrorBodyBytes+1))
		_ = resp.Body.Close()
		if err == nil && len(b) <= MaxErrorBodyBytes {
			code = providerCodeFromBody(b)
		}
	}
	return &Error{
		Status:     resp.StatusCode,
		Operation:  OpWebSocket,
		Code:       code,
		RetryAfter: parseRetryAfter(resp.Header.Get("Retry-After"), time.Now()),
	}
}

// Next returns the next event frame. It returns ctx.Err() when ctx ends
// first, in which case the stream stays usable. Any other error means the
// stream has ended: it is a [*StreamError] (matching [ErrStreamClosed]) and
// every later call returns it again. Frames received before the stream
// ended are still returned first.
func (s *Stream) Next(ctx context.Context) (Frame, error) {
	select {
	case f := <-s.frames:
		return Frame{Raw: f}, nil
	default:
	}
	select {
	case f := <-s.frames:
		return Frame{Raw: f}, nil
	case <-s.done:
		select {
		case f := <-s.frames:
			return Frame{Raw: f}, nil
		default:
			return Frame{}, s.err
		}
	case <-ctx.Done():
		return Frame{}, ctx.Err()
	}
}

// TryNext returns a frame already received, without waiting: ok is false
// when none is waiting (the stream may still be live; call [Stream.Next]).
// A caller drains a burst with it after Next returned its first frame.
func (s *Stream) TryNext() (f Frame, ok bool) {
	select {
	case raw := <-s.frames:
		return Frame{Raw: raw}, true
	default:
		return Frame{}, false
	}
}

// Done returns a channel that is closed when the stream has ended; [Err]
// then reports why.
func (s *Stream) Done() <-chan struct{} { return s.done }

// Err returns the error that ended the stream, or nil while it is live.
func (s *Stream) Err() error {
	select {
	case <-s.done:
		return s.err
	default:
		return nil
	}
}

// Close ends the stream with a normal closure. It is idempotent and safe to
// call concurrently with Next; it always returns nil.
func (s *Stream) Close() error {
	s.fail(&StreamError{Reason: StreamReasonClosedByClient, CloseStatus: -1})
	s.shutdown()
	return nil
}

func (s *Stream) shutdown() {
	// Close performs the closing handshake (bounded by the library); the
	// reader goroutine observes it and exits. Cancelling the lifetime
	// context afterwards stops the ping loop and releases everything even
	// if the peer never answered.
	_ = s.conn.Close(websocket.StatusNormalClosure, "")
	s.cancel()
}

// fail records the first terminal error and marks the stream done.
func (s *Stream) fail(err *StreamError) {
	s.failOnce.Do(func() {
		s.err = err
		close(s.done)
	})
}

// controlFrame reports the type ("subscribed", "error", ...) and error
// name of a frame. Keys are matched exactly: encoding/json struct decoding
// is case-insensitive, and {"TYPE":"subscribed"} must not be taken for an
// acknowledgement. The frame is parsed once; event frames can be tens of
// MiB.
func controlFrame(data []byte) (typ, name string) {
	var m map[string]json.RawMessage
	if json.Unmarshal(data, &m) != nil {
		return "", ""
	}
	typ, _ = jsonString(m["type"])
	name, _ = jsonString(m["name"])
	return typ, name
}

func (s *Stream) readLoop(ctx context.Context) {
	for {
		_, data, err := s.conn.Read(ctx)
		if err != nil {
			s.fail(readError(err))
			_ = s.conn.CloseNow()
			return
		}
		switch typ, name := controlFrame(data); typ {
		case "subscribed":
			s.ackOnce.Do(func() { close(s.acked) })
			continue
		case "error":
			if _, ok := streamErrorNames[name]; !ok {
				name = "unknown"
			}
			// An error frame ends the stream (docs/email-pipeline.md, "The provider client").
			s.fail(&StreamError{Reason: StreamReasonErrorFrame, Name: name, CloseStatus: -1})
			_ = s.conn.Close(websocket.StatusNormalClosure, "")
			return
		}
		select {
		case s.frames <- data:
		case <-ctx.Done():
			return
		}
	}
}

// exactType reports whether the frame's "type" key is spelled exactly so;
// encoding/json matches struct fields case-insensitively, and a frame with
// {"TYPE":"subscribed"} must not be taken for an acknowledgement.
func exactType(data []byte) bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(data, &m) != nil {
		return false
	}
	_, ok := m["type"]
	return ok
}

func readError(err error) *StreamError {
	status := int(websocket.CloseStatus(err))
	switch {
	case websocket.CloseStatus(err) == websocket.StatusMessageTooBig || errors.Is(err, websocket.ErrMessageTooBig):
		return &StreamError{Reason: StreamReasonFrameTooLarge, CloseStatus: status, err: err}
	case status >= 0:
		return &StreamError{Reason: StreamReasonClosed, CloseStatus: status, err: err}
	}
	return &StreamError{Reason: StreamReasonReadFailed, CloseStatus: -1, err: err}
}

// pingLoop pings every interval until the stream ends, failing it when a
// pong does not come within timeout.
//
// Why a timer and not a goroutine with a ticker: a replica holds
// thousands of idle streams, and a parked goroutine per stream costs its
// stack (at least 8 KiB) for nothing; the timer's function runs on a
// goroutine only while it pings.
func (s *Stream) pingLoop(ctx context.Context, interval, timeout time.Duration) {
	var mu sync.Mutex
	var t *time.Timer
	ping := func() {
		select {
		case <-ctx.Done():
			return
		case <-s.done:
			return
		default:
		}
		pctx, cancel := context.WithTimeout(ctx, timeout)
		err := s.conn.Ping(pctx)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				s.fail(&StreamError{Reason: StreamReasonPingTimeout, CloseStatus: -1, err: err})
			}
			_ = s.conn.CloseNow()
			return
		}
		mu.Lock()
		t.Reset(interval)
		mu.Unlock()
	}
	mu.Lock()
	t = time.AfterFunc(interval, ping)
	mu.Unlock()
	// The lifetime context ends in shutdown, whichever way the stream ended.
	context.AfterFunc(ctx, func() {
		mu.Lock()
		t.Stop()
		mu.Unlock()
	})
}
