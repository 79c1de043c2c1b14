package emulator

import (
	"testing"
)

// The allow/block lists API: organization, pod and inbox scopes, the most
// specific scope wins, blocked mail is labelled and hidden, replies to the
// inbox's own mail are checked against the reply lists only, and the send
// lists refuse a send.
func TestListsScopesAndVerdicts(t *testing.T) {
	t.Parallel()
	s, key := startTest(t, Options{})
	in := createInbox(t, s, key, "lists")
	ib := mustCall(t, s, key, "GET", "/inboxes/"+esc(in), nil, 200)
	pod := ib.str("pod_id")

	// Validation and wire shape.
	mustCall(t, s, key, "POST", "/inboxes/"+esc(in)+"/lists/sideways/block", map[string]any{"entry": "a.example"}, 400)
	mustCall(t, s, key, "POST", "/inboxes/"+esc(in)+"/lists/receive/block", map[string]any{"entry": "not an entry"}, 400)
	e := mustCall(t, s, key, "POST", "/inboxes/"+esc(in)+"/lists/receive/block", map[string]any{"entry": "Spam.Example", "reason": "flood"}, 200)
	if e.str("entry") != "spam.example" || e.str("entry_type") != "domain" || e.str("inbox_id") != in || e.str("pod_id") != pod ||
		e.str("direction") != "receive" || e.str("list_type") != "block" || e.str("reason") != "flood" || e.str("organization_id") == "" {
		t.Fatalf("entry: %s", e.raw)
	}
	// Creating it again returns it; the list holds it once.
	mustCall(t, s, key, "POST", "/inboxes/"+esc(in)+"/lists/receive/block", map[string]any{"entry": "spam.example"}, 200)
	l := mustCall(t, s, key, "GET", "/inboxes/"+esc(in)+"/lists/receive/block", nil, 200)
	if len(l.list("entries")) != 1 || l.body["count"].(float64) != 1 {
		t.Fatalf("list: %s", l.raw)
	}
	mustCall(t, s, key, "GET", "/inboxes/"+esc(in)+"/lists/receive/block/spam.example", nil, 200)
	mustCall(t, s, key, "GET", "/inboxes/"+esc(in)+"/lists/receive/allow/spam.example", nil, 404)

	blockedMail := deliver(t, s, in, map[string]any{"from": "x@spam.example", "subject": "B", "text": "x"})
	okMail := deliver(t, s, in, map[string]any{"from": "x@fine.example", "subject": "F", "text": "x"})
	labels := func(id string) []any {
		return mustCall(t, s, key, "GET", "/inboxes/"+esc(in)+"/messages/"+esc(id), nil, 200).list("labels")
	}
	if !hasString(labels(blockedMail.MessageID), "blocked") || hasString(labels(okMail.MessageID), "blocked") {
		t.Fatal("receive block list not applied")
	}

	// Organization block, pod allow for one address: the more specific
	// pod entry wins for that address only.
	mustCall(t, s, key, "POST", "/lists/receive/block", map[string]any{"entry": "corp.example"}, 200)
	mustCall(t, s, key, "POST", "/pods/"+pod+"/lists/receive/allow", map[string]any{"entry": "boss@corp.example"}, 200)
	if !hasString(labels(deliver(t, s, in, map[string]any{"from": "x@corp.example", "subject": "c", "text": "x"}).MessageID), "blocked") {
		t.Fatal("organization block not applied")
	}
	// The pod allow list is now active: only its entries pass the receive
	// lists of this pod (the boss), everyone else is blocked.
	if hasString(labels(deliver(t, s, in, map[string]any{"from": "boss@corp.example", "subject": "c", "text": "x"}).MessageID), "blocked") {
		t.Fatal("pod allow entry did not win over the organization block")
	}
	if !hasString(labels(deliver(t, s, in, map[string]any{"from": "y@other.example", "subject": "o", "text": "x"}).MessageID), "blocked") {
		t.Fatal("sender off an active allow list was not blocked")
	}
	mustCall(t, s, key, "DELETE", "/pods/"+pod+"/lists/receive/allow/boss@corp.example", nil, 204)
	mustCall(t, s, key, "DELETE", "/pods/"+pod+"/lists/receive/allow/boss@corp.example", nil, 404)

	// A reply to our own mail is checked against the reply lists only.
	sent := mustCall(t, s, key, "POST", "/inboxes/"+esc(in)+"/messages/send", map[string]any{"to": "x@spam.example", "subject": "Hi", "text": "x"}, 200)
	reply := deliver(t, s, in, map[string]any{"from": "x@spam.example", "subject": "Re: Hi", "text": "x", "in_reply_to": sent.str("message_id")})
	if hasString(labels(reply.MessageID), "blocked") {
		t.Fatal("a reply to our own mail was checked against the receive lists")
	}
	mustCall(t, s, key, "POST", "/inboxes/"+esc(in)+"/lists/reply/block", map[string]any{"entry": "x@spam.example"}, 200)
	reply2 := deliver(t, s, in, map[string]any{"from": "x@spam.example", "subject": "Re: Hi", "text": "y", "in_reply_to": sent.str("message_id")})
	if !hasString(labels(reply2.MessageID), "blocked") {
		t.Fatal("reply block list not applied")
	}

	// The send lists refuse a send.
	mustCall(t, s, key, "POST", "/inboxes/"+esc(in)+"/lists/send/block", map[string]any{"entry": "nope@example.com"}, 200)
	r := mustCall(t, s, key, "POST", "/inboxes/"+esc(in)+"/messages/send", map[string]any{"to": "nope@example.com", "subject": "Hi", "text": "x"}, 403)
	if r.str("name") == "" && r.str("code") == "" {
		t.Fatalf("refusal: %s", r.raw)
	}

	// Scope: an inbox key sees its inbox's lists, not the organization's.
	k := mustCall(t, s, key, "POST", "/inboxes/"+esc(in)+"/api-keys", map[string]any{"name": "runtime"}, 200).str("api_key")
	mustCall(t, s, k, "GET", "/inboxes/"+esc(in)+"/lists/receive/block", nil, 200)
	mustCall(t, s, k, "GET", "/lists/receive/block", nil, 403)
	// Without list permissions the key is refused.
	k2 := mustCall(t, s, key, "POST", "/inboxes/"+esc(in)+"/api-keys", map[string]any{"permissions": map[string]bool{"message_read": true}}, 200).str("api_key")
	mustCall(t, s, k2, "GET", "/inboxes/"+esc(in)+"/lists/receive/block", nil, 403)

	// The control API sees the inbox-scoped entries.
	if got := s.ListEntries(in); len(got) != 3 {
		t.Fatalf("inbox entries: %+v", got)
	}
}
