package emulator

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// An emulator with a state file keeps its mailboxes across a restart: the
// keys still authenticate, inboxes, threads, messages, the outbox and
// completed idempotent sends come back, and mail replying to an old
// message joins the old thread.
func TestStateFileSurvivesRestart(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "emulator-state.json")
	opts := Options{StateFile: file, APIKeys: []string{"am_state_test_key"}, DeliveryDelay: time.Millisecond}
	s, err := Start(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	key := "am_state_test_key"
	in := createInbox(t, s, key, "keeper")
	first := deliver(t, s, in, map[string]any{"from": "Bob <bob@example.com>", "subject": "Question", "text": "Hello?", "message_id": "q1@example.com"})
	rep := mustCall(t, s, key, "POST", "/inboxes/"+esc(in)+"/messages/"+esc(first.MessageID)+"/reply",
		map[string]any{"text": "Answer"}, 200, "Idempotency-Key", "reply-1")
	waitFor(t, "the reply's delivery receipt", func() bool {
		m := mustCall(t, s, key, "GET", "/inboxes/"+esc(in)+"/messages/"+esc(rep.str("message_id")), nil, 200)
		return hasString(m.list("labels"), "delivered")
	})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(file)
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("state file: %v %v", info, err)
	}

	s2, err := Start(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s2.Close() })
	// The pre-created key is not duplicated into a second organization.
	if orgs := len(s2.state.orgs); orgs != 1 {
		t.Fatalf("%d organizations after restart", orgs)
	}
	got := mustCall(t, s2, key, "GET", "/inboxes/"+esc(in)+"/threads/"+first.ThreadID, nil, 200)
	if got.body["message_count"].(float64) != 2 {
		t.Fatalf("thread after restart: %s", got.raw)
	}
	m := mustCall(t, s2, key, "GET", "/inboxes/"+esc(in)+"/messages/"+esc(rep.str("message_id")), nil, 200)
	if !hasString(m.list("labels"), "delivered") || m.str("text") != "Answer" {
		t.Fatalf("sent message after restart: %s", m.raw)
	}
	if ob := s2.Outbox("bob@example.com", ""); len(ob) != 1 || ob[0].MessageID != rep.str("message_id") {
		t.Fatalf("outbox after restart: %+v", ob)
	}
	// The same idempotent reply replays instead of sending again.
	again := mustCall(t, s2, key, "POST", "/inboxes/"+esc(in)+"/messages/"+esc(first.MessageID)+"/reply",
		map[string]any{"text": "Answer"}, 200, "Idempotency-Key", "reply-1")
	if again.str("message_id") != rep.str("message_id") || len(s2.Outbox("bob@example.com", "")) != 1 {
		t.Fatalf("idempotent replay after restart: %s", again.raw)
	}
	// Bob answers the agent's reply: it joins the old thread.
	next := deliver(t, s2, in, map[string]any{"from": "bob@example.com", "subject": "Re: Question", "text": "Thanks",
		"in_reply_to": rep.str("message_id")})
	if next.ThreadID != first.ThreadID {
		t.Fatalf("reply after restart started thread %s, want %s", next.ThreadID, first.ThreadID)
	}
	// New state is written too: a third start sees the new message.
	if err := s2.Close(); err != nil {
		t.Fatal(err)
	}
	s3, err := Start(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s3.Close()
	got = mustCall(t, s3, key, "GET", "/inboxes/"+esc(in)+"/threads/"+first.ThreadID, nil, 200)
	if got.body["message_count"].(float64) != 3 {
		t.Fatalf("thread after the second restart: %s", got.raw)
	}
}

// A state file is written shortly after a change, not only at Close, so
// a killed emulator loses at most the last moment.
func TestStateFileWrittenOnChange(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "state.json")
	s, key := startTest(t, Options{StateFile: file})
	in := createInbox(t, s, key, "early")
	deliver(t, s, in, map[string]any{"from": "a@example.com", "subject": "S", "text": "T"})
	waitFor(t, "the state file to hold the message", func() bool {
		b, err := os.ReadFile(file)
		if err != nil {
			return false
		}
		var snap snapshot
		return json.Unmarshal(b, &snap) == nil && len(snap.Messages) == 1 && len(snap.Inboxes) == 1
	})
}

// A damaged state file stops the start with a message naming the file
// rather than silently starting empty.
func TestStateFileDamaged(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "state.json")
	if err := os.WriteFile(file, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := Start(context.Background(), Options{StateFile: file})
	if err == nil {
		s.Close()
		t.Fatal("started with a damaged state file")
	}
	if want := file; !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "remove it") {
		t.Fatalf("error %q does not name the file and the fix", err)
	}
}
