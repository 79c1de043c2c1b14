package emulator

import (
	"context"
	"errors"
	"testing"
)

func TestPreconfiguredKeysAndPods(t *testing.T) {
	t.Parallel()
	if _, err := Start(context.Background(), Options{APIKeys: []string{"not-a-key"}}); err == nil {
		t.Fatal("a key without the am_ prefix was accepted")
	}
	s, _ := startTest(t, Options{APIKeys: []string{"am_one", "am_two"}})
	// Both preconfigured keys belong to the same organization.
	a := createInbox(t, s, "am_one", "shared")
	mustCall(t, s, "am_two", "GET", "/inboxes/"+esc(a), nil, 200)
	me := mustCall(t, s, "am_one", "GET", "/auth/me", nil, 200)
	if me.str("scope_type") != "organization" || me.str("scope_id") != me.str("organization_id") {
		t.Fatalf("auth/me: %s", me.raw)
	}

	pod := mustCall(t, s, "am_one", "POST", "/pods", map[string]any{"name": "team", "client_id": "p1"}, 200)
	podID := pod.str("pod_id")
	if again := mustCall(t, s, "am_one", "POST", "/pods", map[string]any{"client_id": "p1"}, 200); again.str("pod_id") != podID {
		t.Fatal("pod client_id idempotency")
	}
	inPod := mustCall(t, s, "am_one", "POST", "/pods/"+podID+"/inboxes", map[string]any{"username": "inpod"}, 200)
	if inPod.str("pod_id") != podID {
		t.Fatalf("pod inbox: %s", inPod.raw)
	}
	k := mustCall(t, s, "am_one", "POST", "/pods/"+podID+"/api-keys", map[string]any{"name": "pod key"}, 200)
	podKey := k.str("api_key")
	if k.str("pod_id") != podID {
		t.Fatalf("pod key: %s", k.raw)
	}
	if me := mustCall(t, s, podKey, "GET", "/auth/me", nil, 200); me.str("scope_type") != "pod" || me.str("scope_id") != podID {
		t.Fatalf("pod auth/me: %s", me.raw)
	}
	list := mustCall(t, s, podKey, "GET", "/inboxes", nil, 200)
	if n := len(list.list("inboxes")); n != 1 {
		t.Fatalf("pod key sees %d inboxes", n)
	}
	mustCall(t, s, podKey, "GET", "/inboxes/"+esc(a), nil, 404)
	// A pod key creates inboxes in its pod.
	created := mustCall(t, s, podKey, "POST", "/inboxes", map[string]any{"username": "bypod"}, 200)
	if created.str("pod_id") != podID {
		t.Fatalf("pod key inbox: %s", created.raw)
	}
	mustCall(t, s, "am_one", "DELETE", "/pods/"+podID, nil, 403)

	// Go API mirrors the control API.
	res, err := s.Deliver(a, DeliverRequest{From: "x@example.com", Subject: "go api", Text: "hi"})
	if err != nil || res.MessageID == "" || res.ThreadID == "" {
		t.Fatalf("Deliver: %+v %v", res, err)
	}
	if _, err := s.Deliver("nobody@agentmail.to", DeliverRequest{From: "x@example.com"}); !errors.Is(err, ErrNoSuchInbox) {
		t.Fatalf("Deliver to unknown inbox: %v", err)
	}
	if err := s.EmitMessageEvent(res.MessageID, "bounced"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("receipt for a received message: %v", err)
	}
	if err := s.VerifyDomain("unknown.example"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("verify unknown domain: %v", err)
	}
	if r := control(t, s, "GET", "/_emulator/inboxes?address=SHARED@agentmail.to", nil); len(r.list("inboxes")) != 1 {
		t.Fatalf("lookup: %s", r.raw)
	}
}
