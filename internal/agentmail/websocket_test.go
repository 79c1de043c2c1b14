package agentmail

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// wsServer starts a loopback WebSocket server running handle for each
// accepted connection. Handshake properties are checked by the caller via
// the recorded request.
func wsServer(t *testing.T, opts *websocket.AcceptOptions, handle func(ctx context.Context, c *websocket.Conn, r *http.Request)) (string, *recorder) {
	t.Helper()
	rec := &recorder{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec.record(r)
		c, err := websocket.Accept(w, r, opts)
		if err != nil {
			return
		}
		defer c.CloseNow()
		handle(r.Context(), c, r)
	}))
	t.Cleanup(srv.Close)
	return "ws" + strings.TrimPrefix(srv.URL, "http") + "/v0", rec
}

func readSubscribe(ctx context.Context, t *testing.T, c *websocket.Conn) subscribeFrame {
	t.Helper()
	_, data, err := c.Read(ctx)
	if err != nil {
		t.Errorf("server read: %v", err)
		return subscribeFrame{}
	}
	var sub subscribeFrame
	if err := json.Unmarshal(data, &sub); err != nil {
		t.Errorf("subscribe frame %s: %v", data, err)
	}
	return sub
}

func TestStreamHandshakeAndEvents(t *testing.T) {
	t.Parallel()
	big := `{"type":"event","event_type":"message.received","event_id":"evt_big","message":{"inbox_id":"a@b.c","thread_id":"t","message_id":"<big>","text":"` +
		strings.Repeat("x", 5<<20) + `"}}`
	gotSub := make(chan subscribeFrame, 1)
	url, rec := wsServer(t, nil, func(ctx context.Context, c *websocket.Conn, r *http.Request) {
		gotSub <- readSubscribe(ctx, t, c)
		_ = c.Write(ctx, websocket.MessageText, []byte(`{"type":"subscribed","inbox_ids":["a@b.c"]}`))
		_ = c.Write(ctx, websocket.MessageText, []byte(big))
		_ = c.Write(ctx, websocket.MessageText, []byte(`{"type":"message_sent","send":{"inbox_id":"a@b.c","message_id":"<s>"}}`))
		_ = c.Write(ctx, websocket.MessageText, []byte(`{"type":"subscribed"}`)) // a repeated ack is swallowed
		_ = c.Close(websocket.StatusGoingAway, "bye SECRET-REASON")
	})
	s, err := Dial(testContext(t), url, testKey, []string{"a@b.c"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	sub := <-gotSub
	want := subscribeFrame{Type: "subscribe", InboxIDs: []string{"a@b.c"}, EventTypes: ChannelEventTypes()}
	if !reflect.DeepEqual(sub, want) {
		t.Fatalf("subscribe frame %+v", sub)
	}
	_, req, _, _ := rec.snapshot()
	if req.Header.Get("Authorization") != "Bearer "+testKey {
		t.Fatalf("Authorization %q", req.Header.Get("Authorization"))
	}
	if req.URL.RawQuery != "" {
		t.Fatalf("query %q carries credentials?", req.URL.RawQuery)
	}

	f, err := s.Next(testContext(t))
	if err != nil || len(f.Raw) != len(big) {
		t.Fatalf("big frame: %d bytes, %v", len(f.Raw), err)
	}
	ev, err := f.Event()
	if err != nil || ev.MessageID != "<big>" || ev.EventID != "evt_big" {
		t.Fatalf("event %+v %v", ev, err)
	}
	f, err = s.Next(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	if ev, _ := f.Event(); ev == nil || ev.Kind != EventMessageSent {
		t.Fatalf("second frame %s", f.Raw)
	}
	_, err = s.Next(testContext(t))
	var se *StreamError
	if !errors.As(err, &se) || se.Reason != StreamReasonClosed || se.CloseStatus != int(websocket.StatusGoingAway) || !errors.Is(err, ErrStreamClosed) {
		t.Fatalf("end: %v", err)
	}
	if strings.Contains(err.Error(), "SECRET") {
		t.Fatalf("close reason leaked: %q", err)
	}
	if IsAuthFailure(err) {
		t.Fatal("a dropped stream is not an auth failure")
	}
	if _, again := s.Next(testContext(t)); again != err {
		t.Fatalf("later Next returned %v", again)
	}
	<-s.Done()
	if s.Err() != err {
		t.Fatal("Err differs")
	}
}

func TestStreamHandshakeRejected(t *testing.T) {
	t.Parallel()
	for _, status := range []int{401, 403, 429} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", "5")
			w.WriteHeader(status)
			_, _ = w.Write([]byte(`{"name":"UnauthorizedError","code":"unknown_api_key","message":"SECRET key ` + testKey + `"}`))
		}))
		_, err := Dial(testContext(t), "ws"+strings.TrimPrefix(srv.URL, "http")+"/v0", testKey, []string{"a@b.c"}, nil)
		srv.Close()
		pe := asError(t, err)
		if pe.Status != status || pe.Operation != OpWebSocket || pe.Code != CodeUnknownAPIKey || pe.RetryAfter != 5*time.Second {
			t.Fatalf("%d: %+v", status, pe)
		}
		if IsAuthFailure(err) != (status != 429) {
			t.Fatalf("%d: IsAuthFailure = %v", status, IsAuthFailure(err))
		}
		if strings.Contains(err.Error(), "SECRET") || strings.Contains(err.Error(), testKey) {
			t.Fatalf("leak: %q", err)
		}
	}
}

func TestStreamErrorFrame(t *testing.T) {
	t.Parallel()
	t.Run("before ack", func(t *testing.T) {
		t.Parallel()
		url, _ := wsServer(t, nil, func(ctx context.Context, c *websocket.Conn, r *http.Request) {
			readSubscribe(ctx, t, c)
			_ = c.Write(ctx, websocket.MessageText, []byte(`{"type":"error","name":"ForbiddenError","message":"label_spam_read is forbidden SECRET"}`))
			_, _, _ = c.Read(ctx)
		})
		_, err := Dial(testContext(t), url, testKey, []string{"a@b.c"}, nil)
		var se *StreamError
		if !errors.As(err, &se) || se.Reason != StreamReasonErrorFrame || se.Name != "ForbiddenError" {
			t.Fatalf("err = %v", err)
		}
		if !IsAuthFailure(err) || !errors.Is(err, ErrForbidden) || strings.Contains(err.Error(), "SECRET") {
			t.Fatalf("err = %q", err)
		}
	})
	t.Run("after ack", func(t *testing.T) {
		t.Parallel()
		url, _ := wsServer(t, nil, func(ctx context.Context, c *websocket.Conn, r *http.Request) {
			readSubscribe(ctx, t, c)
			_ = c.Write(ctx, websocket.MessageText, []byte(`{"type":"subscribed"}`))
			_ = c.Write(ctx, websocket.MessageText, []byte(`{"type":"error","name":"SomethingNew<script>","message":"SECRET"}`))
			_, _, _ = c.Read(ctx)
		})
		s, err := Dial(testContext(t), url, testKey, []string{"a@b.c"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		_, err = s.Next(testContext(t))
		var se *StreamError
		if !errors.As(err, &se) || se.Reason != StreamReasonErrorFrame || se.Name != "unknown" || IsAuthFailure(err) {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestStreamSubscribeTimeout(t *testing.T) {
	t.Parallel()
	url, _ := wsServer(t, nil, func(ctx context.Context, c *websocket.Conn, r *http.Request) {
		_, _, _ = c.Read(ctx)
		_, _, _ = c.Read(ctx) // never acknowledge
	})
	_, err := Dial(testContext(t), url, testKey, []string{"a@b.c"}, &StreamOptions{SubscribeTimeout: 200 * time.Millisecond})
	var se *StreamError
	if !errors.As(err, &se) || se.Reason != StreamReasonSubscribeTimeout || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v", err)
	}
}

func TestStreamKeepAlive(t *testing.T) {
	t.Parallel()
	var pings atomic.Int32
	opts := &websocket.AcceptOptions{OnPingReceived: func(context.Context, []byte) bool { pings.Add(1); return true }}
	url, _ := wsServer(t, opts, func(ctx context.Context, c *websocket.Conn, r *http.Request) {
		readSubscribe(ctx, t, c)
		_ = c.Write(ctx, websocket.MessageText, []byte(`{"type":"subscribed"}`))
		_, _, _ = c.Read(ctx) // keeps reading, so pings are answered
	})
	s, err := Dial(testContext(t), url, testKey, []string{"a@b.c"}, &StreamOptions{PingInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "three pings", func() bool { return pings.Load() >= 3 })
	if s.Err() != nil {
		t.Fatalf("stream ended: %v", s.Err())
	}
	_ = s.Close()
	_ = s.Close() // idempotent
	_, err = s.Next(testContext(t))
	var se *StreamError
	if !errors.As(err, &se) || se.Reason != StreamReasonClosedByClient {
		t.Fatalf("after Close: %v", err)
	}
}

func TestStreamPingTimeout(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	url, _ := wsServer(t, nil, func(ctx context.Context, c *websocket.Conn, r *http.Request) {
		readSubscribe(ctx, t, c)
		_ = c.Write(ctx, websocket.MessageText, []byte(`{"type":"subscribed"}`))
		// Stop reading: pings are never answered.
		select {
		case <-release:
		case <-ctx.Done():
		}
	})
	s, err := Dial(testContext(t), url, testKey, []string{"a@b.c"}, &StreamOptions{PingInterval: 20 * time.Millisecond, PingTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Next(testContext(t))
	var se *StreamError
	if !errors.As(err, &se) || se.Reason != StreamReasonPingTimeout {
		t.Fatalf("err = %v", err)
	}
}

func TestStreamFrameTooLarge(t *testing.T) {
	t.Parallel()
	url, _ := wsServer(t, nil, func(ctx context.Context, c *websocket.Conn, r *http.Request) {
		readSubscribe(ctx, t, c)
		_ = c.Write(ctx, websocket.MessageText, []byte(`{"type":"subscribed"}`))
		_ = c.Write(ctx, websocket.MessageText, bytes.Repeat([]byte(" "), 4096))
		_, _, _ = c.Read(ctx)
	})
	s, err := Dial(testContext(t), url, testKey, []string{"a@b.c"}, &StreamOptions{ReadLimit: 1024})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Next(testContext(t))
	var se *StreamError
	if !errors.As(err, &se) || se.Reason != StreamReasonFrameTooLarge {
		t.Fatalf("err = %v", err)
	}
}

func TestStreamNextContext(t *testing.T) {
	t.Parallel()
	send := make(chan struct{})
	url, _ := wsServer(t, nil, func(ctx context.Context, c *websocket.Conn, r *http.Request) {
		readSubscribe(ctx, t, c)
		_ = c.Write(ctx, websocket.MessageText, []byte(`{"type":"subscribed"}`))
		select {
		case <-send:
		case <-ctx.Done():
			return
		}
		_ = c.Write(ctx, websocket.MessageText, []byte(`{"type":"message_delivered","delivery":{"inbox_id":"a@b.c","message_id":"<d>"}}`))
		_, _, _ = c.Read(ctx)
	})
	s, err := Dial(testContext(t), url, testKey, []string{"a@b.c"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Next(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Next: %v", err)
	}
	close(send)
	f, err := s.Next(testContext(t))
	if err != nil {
		t.Fatalf("stream unusable after a cancelled Next: %v", err)
	}
	if ev, _ := f.Event(); ev == nil || ev.Kind != EventMessageDelivered {
		t.Fatalf("frame %s", f.Raw)
	}
}

func TestDialArguments(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	if _, err := Dial(ctx, "ws://ws.agentmail.to/v0", testKey, nil, nil); !errors.Is(err, ErrInvalidBaseURL) {
		t.Fatalf("remote ws:// accepted: %v", err)
	}
	if _, err := Dial(ctx, "wss://ws.agentmail.to/v0?api_key=x", testKey, nil, nil); !errors.Is(err, ErrInvalidBaseURL) {
		t.Fatalf("query accepted: %v", err)
	}
	if _, err := Dial(ctx, "ws://127.0.0.1:1/v0", "", nil, nil); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("empty key accepted: %v", err)
	}
	if _, err := Dial(ctx, "ws://127.0.0.1:1/v0", testKey, []string{""}, nil); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("empty inbox accepted: %v", err)
	}
}
