package emulator

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	svix "github.com/svix/svix-webhooks/go"
)

// The documented Svix test vector must come out of the emulator's signer.
func TestSignSvixVector(t *testing.T) {
	t.Parallel()
	sig, err := signSvix("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, []byte(`{"test": 2432232314}`))
	if err != nil {
		t.Fatal(err)
	}
	if want := "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="; sig != want {
		t.Fatalf("signature %s, want %s", sig, want)
	}
}

type capturedHook struct {
	header http.Header
	body   []byte
}

// TestWebhookSignaturesVerifyWithSvix delivers real events to a loopback
// receiver and verifies them with the official Svix library; a one-byte
// change or a stale timestamp must fail verification.
func TestWebhookSignaturesVerifyWithSvix(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var got []capturedHook
	failFirst := map[string]bool{}
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		got = append(got, capturedHook{header: r.Header.Clone(), body: body})
		// Fail the first attempt of every message to exercise retries.
		id := r.Header.Get("svix-id")
		if !failFirst[id] {
			failFirst[id] = true
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer recv.Close()

	s, key := startTest(t, Options{})
	s.SetWebhookRetryDelays([]time.Duration{0, 10 * time.Millisecond, 20 * time.Millisecond})
	in := createInbox(t, s, key, "signed")
	wh := mustCall(t, s, key, "POST", "/webhooks", map[string]any{
		"url": recv.URL + "/hook", "event_types": []string{"message.received", "message.sent", "message.delivered"},
		"inbox_ids": []string{in}, "headers": map[string]string{"X-Custom": "yes"},
	}, 200)
	secret := wh.str("secret")
	deliver(t, s, in, map[string]any{"from": "a@example.com", "subject": "hook me", "text": "x"})
	mustCall(t, s, key, "POST", "/inboxes/"+esc(in)+"/messages/send", map[string]any{"to": "b@example.com", "subject": "out", "text": "y"}, 200)

	waitFor(t, "six webhook attempts (3 events × failure + retry)", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) >= 6
	})
	mu.Lock()
	hooks := append([]capturedHook(nil), got...)
	mu.Unlock()

	verifier, err := svix.NewWebhook(secret)
	if err != nil {
		t.Fatalf("svix.NewWebhook: %v", err)
	}
	seenTypes := map[string]int{}
	ids := map[string]int{}
	for _, h := range hooks {
		if err := verifier.Verify(h.body, h.header); err != nil {
			t.Fatalf("svix rejected an emulator signature: %v\nheaders: %v", err, h.header)
		}
		if h.header.Get("X-Custom") != "yes" || h.header.Get("Content-Type") != "application/json" {
			t.Fatalf("headers: %v", h.header)
		}
		var ev map[string]any
		if err := json.Unmarshal(h.body, &ev); err != nil {
			t.Fatal(err)
		}
		seenTypes[ev["event_type"].(string)]++
		ids[h.header.Get("svix-id")]++

		tampered := append([]byte(nil), h.body...)
		tampered[len(tampered)/2] ^= 0x01
		if verifier.Verify(tampered, h.header) == nil {
			t.Fatal("svix accepted a body changed by one byte")
		}
		stale := h.header.Clone()
		stale.Set("svix-timestamp", strconv.FormatInt(time.Now().Add(-10*time.Minute).Unix(), 10))
		if verifier.Verify(h.body, stale) == nil {
			t.Fatal("svix accepted a stale timestamp")
		}
		stale.Set("svix-timestamp", "1")
		if verifier.Verify(h.body, stale) == nil {
			t.Fatal("svix accepted svix-timestamp: 1")
		}
	}
	for _, typ := range []string{"message.received", "message.sent", "message.delivered"} {
		if seenTypes[typ] != 2 {
			t.Fatalf("%s delivered %d times, want 2 (one retry): %v", typ, seenTypes[typ], seenTypes)
		}
	}
	for id, n := range ids {
		if !strings.HasPrefix(id, "msg_") || n != 2 {
			t.Fatalf("svix-id %s seen %d times; retries must reuse the id", id, n)
		}
	}
	waitFor(t, "attempt log", func() bool {
		ok := 0
		for _, a := range s.WebhookAttempts(wh.str("webhook_id")) {
			if a.Succeeded {
				ok++
			}
		}
		return ok == 3
	})
}
