package emulator

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestAuthFailures(t *testing.T) {
	t.Parallel()
	s, key := startTest(t, Options{})
	cases := []struct {
		name, auth string
		status     int
		code       string
		bare       bool
	}{
		{"missing", "", 401, "missing_authorization", false},
		{"wrong scheme", "Token " + key, 401, "missing_authorization", false},
		{"console jwt", "Bearer eyJhbGciOi.x.y", 401, "invalid_token_type", false},
		{"unknown key", "Bearer am_unknown", 403, "", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest("GET", s.APIURL()+"/inboxes", nil)
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			raw, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, raw)
			}
			if tc.bare {
				if string(raw) != `{"message":"Forbidden"}` {
					t.Fatalf("gateway body = %s", raw)
				}
				return
			}
			var e apiError
			if err := json.Unmarshal(raw, &e); err != nil || e.Code != tc.code || e.Name == "" || e.Message == "" {
				t.Fatalf("error body = %s", raw)
			}
		})
	}
	// An empty path segment is rejected by the gateway too.
	r := doAPI(t, s, key, "GET", "/inboxes//messages", nil)
	if r.status != 403 || string(r.raw) != `{"message":"Forbidden"}` {
		t.Fatalf("empty segment: %d %s", r.status, r.raw)
	}
}

func TestScopesAndPermissions(t *testing.T) {
	t.Parallel()
	s, key := startTest(t, Options{})
	a := createInbox(t, s, key, "alpha")
	b := createInbox(t, s, key, "beta")
	k := mustCall(t, s, key, "POST", "/inboxes/"+esc(a)+"/api-keys", map[string]any{
		"name": "runtime", "permissions": map[string]bool{"inbox_read": true, "message_read": true, "api_key_create": true},
	}, 200)
	inboxKey := k.str("api_key")
	if k.str("inbox_id") != a || !strings.HasPrefix(inboxKey, "am_") {
		t.Fatalf("create key: %s", k.raw)
	}

	me := mustCall(t, s, inboxKey, "GET", "/auth/me", nil, 200)
	if me.str("scope_type") != "inbox" || me.str("inbox_id") != a || me.str("scope_id") != a || me.str("pod_id") == "" {
		t.Fatalf("auth/me: %s", me.raw)
	}
	// Out of scope is indistinguishable from missing.
	for _, path := range []string{"/inboxes/" + esc(b), "/inboxes/" + esc(b) + "/messages", "/inboxes/nobody%40agentmail.to"} {
		r := mustCall(t, s, inboxKey, "GET", path, nil, 404)
		if r.str("code") != "not_found" {
			t.Fatalf("%s: %s", path, r.raw)
		}
	}
	list := mustCall(t, s, inboxKey, "GET", "/inboxes", nil, 200)
	if n := len(list.list("inboxes")); n != 1 {
		t.Fatalf("inbox key lists %d inboxes, want 1", n)
	}
	// Missing permission: 403 missing_permission with the legacy message.
	r := mustCall(t, s, inboxKey, "POST", "/inboxes/"+esc(a)+"/messages/send", map[string]any{"to": "x@example.com"}, 403)
	if r.str("code") != "missing_permission" || r.str("message") != "Forbidden" || !strings.Contains(r.str("fix"), "message_send") {
		t.Fatalf("missing permission: %s", r.raw)
	}
	// A restricted key cannot escalate or mint unrestricted keys.
	r = mustCall(t, s, inboxKey, "POST", "/inboxes/"+esc(a)+"/api-keys", map[string]any{"permissions": map[string]bool{"message_send": true}}, 403)
	if r.str("code") != "permission_escalation" {
		t.Fatalf("escalation: %s", r.raw)
	}
	r = mustCall(t, s, inboxKey, "POST", "/inboxes/"+esc(a)+"/api-keys", map[string]any{"name": "child"}, 403)
	if r.str("code") != "unrestricted_key_required" {
		t.Fatalf("unrestricted: %s", r.raw)
	}
	mustCall(t, s, inboxKey, "POST", "/inboxes/"+esc(a)+"/api-keys", map[string]any{"permissions": map[string]bool{"message_read": true}}, 200)
	// Inbox keys cannot create inboxes or use org-wide management routes.
	mustCall(t, s, inboxKey, "POST", "/inboxes", map[string]any{}, 403)
	// Deleting the key makes it unknown to the gateway.
	mustCall(t, s, key, "DELETE", "/inboxes/"+esc(a)+"/api-keys/"+k.str("api_key_id"), nil, 204)
	r = doAPI(t, s, inboxKey, "GET", "/auth/me", nil)
	if r.status != 403 || r.body["code"] != nil {
		t.Fatalf("deleted key: %d %s", r.status, r.raw)
	}
	// Another organization sees nothing of this one.
	_, other := s.CreateOrganization("other")
	mustCall(t, s, other, "GET", "/inboxes/"+esc(a), nil, 404)
}

func TestInboxCreation(t *testing.T) {
	t.Parallel()
	s, key := startTest(t, Options{})
	r := mustCall(t, s, key, "POST", "/inboxes", map[string]any{"username": "Support", "client_id": "c1", "metadata": map[string]any{"team": "x", "n": 1}}, 200)
	if r.str("inbox_id") != "support@agentmail.to" || r.str("email") != r.str("inbox_id") || r.str("pod_id") == "" {
		t.Fatalf("create: %s", r.raw)
	}
	again := mustCall(t, s, key, "POST", "/inboxes", map[string]any{"username": "other", "client_id": "c1"}, 200)
	if again.str("inbox_id") != "support@agentmail.to" {
		t.Fatalf("client_id idempotency: %s", again.raw)
	}
	taken := mustCall(t, s, key, "POST", "/inboxes", map[string]any{"username": "support"}, 403)
	if taken.str("code") != "resource_taken" {
		t.Fatalf("taken: %s", taken.raw)
	}
	mustCall(t, s, key, "POST", "/inboxes", map[string]any{"client_id": "a@b"}, 400)
	mustCall(t, s, key, "POST", "/inboxes", map[string]any{"username": "x", "unknown_field": 1}, 400)

	// Custom domains: unverified → 403 domain_not_verified; verified → ok;
	// subdomains need subdomains_enabled (422).
	mustCall(t, s, key, "POST", "/domains", map[string]any{"domain": "Example.com"}, 200)
	d := mustCall(t, s, key, "GET", "/domains/example.com", nil, 200)
	if d.str("status") != "NOT_STARTED" || len(d.list("records")) == 0 {
		t.Fatalf("domain: %s", d.raw)
	}
	r = mustCall(t, s, key, "POST", "/inboxes", map[string]any{"username": "a", "domain": "example.com"}, 403)
	if r.str("code") != "domain_not_verified" {
		t.Fatalf("unverified: %s", r.raw)
	}
	mustCall(t, s, key, "POST", "/domains/example.com/verify", nil, 204)
	if got := control(t, s, "POST", "/_emulator/domains/example.com/verify", nil); got.status != 200 || got.str("status") != "VERIFIED" {
		t.Fatalf("control verify: %d %s", got.status, got.raw)
	}
	mustCall(t, s, key, "POST", "/inboxes", map[string]any{"username": "a", "domain": "example.com"}, 200)
	r = mustCall(t, s, key, "POST", "/inboxes", map[string]any{"username": "a", "domain": "sub.example.com"}, 422)
	if r.str("code") != "unprocessable" {
		t.Fatalf("subdomain: %s", r.raw)
	}
	list := mustCall(t, s, key, "GET", "/domains", nil, 200)
	item := list.list("domains")[0].(map[string]any)
	if _, has := item["status"]; has {
		t.Fatalf("DomainItem must not carry status: %s", list.raw)
	}
}

// deliver posts an inbound mail through the control endpoint.
func deliver(t testing.TB, s *Server, inbox string, req map[string]any) DeliverResult {
	t.Helper()
	r := control(t, s, "POST", "/_emulator/inboxes/"+esc(inbox)+"/deliver", req)
	if r.status != 200 {
		t.Fatalf("deliver: %d %s", r.status, r.raw)
	}
	return DeliverResult{MessageID: r.str("message_id"), ThreadID: r.str("thread_id")}
}

func TestMessageOrderingAndPagination(t *testing.T) {
	t.Parallel()
	s, key := startTest(t, Options{})
	in := createInbox(t, s, key, "ordering")
	base := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	for i := 0; i < 5; i++ {
		deliver(t, s, in, map[string]any{"from": "a@example.com", "subject": fmt.Sprint("m", i), "text": "x", "date": base.Add(time.Duration(i) * time.Hour).Format(time.RFC3339)})
	}
	page1 := mustCall(t, s, key, "GET", "/inboxes/"+esc(in)+"/messages?limit=2", nil, 200)
	subjects := func(r apiResp) []string {
		var out []string
		for _, m := range r.list("messages") {
			out = append(out, m.(map[string]any)["subject"].(string))
		}
		return out
	}
	if got := subjects(page1); strings.Join(got, ",") != "m4,m3" || page1.body["count"].(float64) != 2 {
		t.Fatalf("page 1 = %v (%s)", got, page1.raw)
	}
	// A message received now with an old Date sorts onto a later page.
	deliver(t, s, in, map[string]any{"from": "a@example.com", "subject": "late", "text": "x", "date": base.Add(90 * time.Minute).Format(time.RFC3339)})
	tok := page1.str("next_page_token")
	page2 := mustCall(t, s, key, "GET", "/inboxes/"+esc(in)+"/messages?limit=2&page_token="+tok, nil, 200)
	if got := subjects(page2); strings.Join(got, ",") != "m2,late" {
		t.Fatalf("page 2 = %v", got)
	}
	page3 := mustCall(t, s, key, "GET", "/inboxes/"+esc(in)+"/messages?limit=2&page_token="+page2.str("next_page_token"), nil, 200)
	if got := subjects(page3); strings.Join(got, ",") != "m1,m0" {
		t.Fatalf("page 3 = %v", got)
	}
	if _, has := page3.body["next_page_token"]; has {
		t.Fatalf("last page carries next_page_token: %s", page3.raw)
	}
	asc := mustCall(t, s, key, "GET", "/inboxes/"+esc(in)+"/messages?ascending=true&limit=1", nil, 200)
	if got := subjects(asc); got[0] != "m0" {
		t.Fatalf("ascending first = %v", got)
	}
	r := mustCall(t, s, key, "GET", "/inboxes/"+esc(in)+"/messages?page_token=garbage", nil, 400)
	if r.str("code") != "validation_error" {
		t.Fatalf("bad token: %s", r.raw)
	}
	m := mustCall(t, s, key, "GET", "/inboxes/"+esc(in)+"/messages/"+esc(page1.list("messages")[0].(map[string]any)["message_id"].(string)), nil, 200)
	if m.str("timestamp") != "2026-01-01T16:00:00.000Z" || m.str("created_at") == m.str("timestamp") {
		t.Fatalf("timestamp/created_at: %s", m.raw)
	}
	// All three array query forms are accepted.
	for _, q := range []string{"labels=received&labels=unread", "labels=received,unread", `labels=%5B%22received%22%2C%22unread%22%5D`, "labels%5B0%5D=received"} {
		r := mustCall(t, s, key, "GET", "/inboxes/"+esc(in)+"/messages?"+q, nil, 200)
		if r.body["count"].(float64) != 6 {
			t.Fatalf("%s: count %v", q, r.body["count"])
		}
	}
}

func TestThreadingLabelsAndExtraction(t *testing.T) {
	t.Parallel()
	s, key := startTest(t, Options{})
	in := createInbox(t, s, key, "threads")
	first := deliver(t, s, in, map[string]any{"from": "Bob <bob@example.com>", "subject": "Question", "text": "Hello?", "message_id": "q1@example.com"})
	if first.MessageID != "<q1@example.com>" {
		t.Fatalf("message id %q", first.MessageID)
	}
	reply := deliver(t, s, in, map[string]any{
		"from": "bob@example.com", "subject": "Re: Question", "references": []string{"<q1@example.com>"},
		"text": "More detail.\n\nOn Mon, Jan 5, 2026 at 10:00 AM Agent <threads@agentmail.to>\nwrote:\n> Hello?\n",
	})
	if reply.ThreadID != first.ThreadID {
		t.Fatalf("reply not threaded: %s vs %s", reply.ThreadID, first.ThreadID)
	}
	other := deliver(t, s, in, map[string]any{"from": "c@example.com", "subject": "New", "text": "x"})
	if other.ThreadID == first.ThreadID {
		t.Fatal("unrelated mail joined the thread")
	}
	m := mustCall(t, s, key, "GET", "/inboxes/"+esc(in)+"/messages/"+esc(reply.MessageID), nil, 200)
	if m.str("extracted_text") != "More detail." {
		t.Fatalf("extracted_text = %q", m.str("extracted_text"))
	}
	th := mustCall(t, s, key, "GET", "/inboxes/"+esc(in)+"/threads/"+first.ThreadID, nil, 200)
	if th.body["message_count"].(float64) != 2 || th.str("last_message_id") != reply.MessageID || len(th.list("messages")) != 2 {
		t.Fatalf("thread: %s", th.raw)
	}

	// Filtered labels: hidden from lists unless included with permission.
	spam := deliver(t, s, in, map[string]any{"from": "spam@example.com", "subject": "Win", "text": "x", "headers": map[string]string{"X-Spam-Flag": "YES"}})
	unauth := deliver(t, s, in, map[string]any{"from": "u@example.com", "subject": "U", "text": "x", "headers": map[string]string{"X-Emulator-Auth": "fail"}})
	if err := s.SetBlockList(in, []string{"blocked.example"}); err != nil {
		t.Fatal(err)
	}
	blocked := deliver(t, s, in, map[string]any{"from": "x@blocked.example", "subject": "B", "text": "x"})
	explicit := deliver(t, s, in, map[string]any{"from": "e@example.com", "subject": "E", "text": "x", "labels": []string{"Trash"}})
	list := mustCall(t, s, key, "GET", "/inboxes/"+esc(in)+"/messages", nil, 200)
	if n := len(list.list("messages")); n != 3 {
		t.Fatalf("visible messages = %d, want 3: %s", n, list.raw)
	}
	for id, label := range map[string]string{spam.MessageID: "spam", unauth.MessageID: "unauthenticated", blocked.MessageID: "blocked", explicit.MessageID: "trash"} {
		r := mustCall(t, s, key, "GET", "/inboxes/"+esc(in)+"/messages/"+esc(id), nil, 200)
		if !hasString(r.list("labels"), label) || !hasString(r.list("labels"), "received") || !hasString(r.list("labels"), "unread") {
			t.Fatalf("%s labels: %v", label, r.list("labels"))
		}
		inc := mustCall(t, s, key, "GET", "/inboxes/"+esc(in)+"/messages?include_"+label+"=true", nil, 200)
		if n := len(inc.list("messages")); n != 4 {
			t.Fatalf("include_%s: %d messages", label, n)
		}
	}
	// Without the label permission the message is invisible even directly.
	k := mustCall(t, s, key, "POST", "/inboxes/"+esc(in)+"/api-keys", map[string]any{"permissions": map[string]bool{"message_read": true}}, 200)
	mustCall(t, s, k.str("api_key"), "GET", "/inboxes/"+esc(in)+"/messages/"+esc(spam.MessageID), nil, 404)

	// Label updates: user labels lower-cased, system labels refused.
	u := mustCall(t, s, key, "PATCH", "/inboxes/"+esc(in)+"/messages/"+esc(first.MessageID), map[string]any{"add_labels": "Done", "remove_labels": []string{"unread"}}, 200)
	if !hasString(u.list("labels"), "done") || hasString(u.list("labels"), "unread") {
		t.Fatalf("labels: %s", u.raw)
	}
	mustCall(t, s, key, "PATCH", "/inboxes/"+esc(in)+"/messages/"+esc(first.MessageID), map[string]any{"add_labels": []string{"sent"}}, 400)
}

// Message-IDs containing "/" and "+" must survive per-segment decoding.
func TestPathSegmentDecoding(t *testing.T) {
	t.Parallel()
	s, key := startTest(t, Options{})
	in := createInbox(t, s, key, "paths")
	d := deliver(t, s, in, map[string]any{"from": "a@example.com", "subject": "s", "text": "t", "message_id": "<a/b+c=d@example.com>"})
	for _, inboxSeg := range []string{esc(in), "paths%40agentmail.to"} {
		r := mustCall(t, s, key, "GET", "/inboxes/"+inboxSeg+"/messages/"+strings.ReplaceAll(esc(d.MessageID), "/", "%2F"), nil, 200)
		if r.str("message_id") != "<a/b+c=d@example.com>" {
			t.Fatalf("got %s", r.raw)
		}
	}
}

func TestSendReceiptsAndHostedDelivery(t *testing.T) {
	t.Parallel()
	s, key := startTest(t, Options{})
	a := createInbox(t, s, key, "sender")
	b := createInbox(t, s, key, "receiver")
	ws := dialWS(t, s, key)
	ws.subscribe(t, map[string]any{"type": "subscribe", "event_types": []string{"message.sent", "message.delivered", "message.bounced", "message.complained", "message.rejected", "message.received"}})

	sent := mustCall(t, s, key, "POST", "/inboxes/"+esc(a)+"/messages/send", map[string]any{
		"to": []string{b, "Out <out@example.com>"}, "cc": "bounce@example.com", "bcc": []string{"complain@example.net", "reject@example.org"},
		"subject": "Hi", "text": "Body",
	}, 200)
	mid := sent.str("message_id")
	want := map[string]bool{"message.sent": false, "message.received": false, "message.delivered": false, "message.bounced": false, "message.complained": false, "message.rejected": false}
	var order []string
	ws.until(t, func(ev map[string]any) bool {
		typ, _ := ev["event_type"].(string)
		if _, ok := want[typ]; ok {
			want[typ] = true
			order = append(order, typ)
		}
		for _, v := range want {
			if !v {
				return false
			}
		}
		return true
	})
	if order[0] != "message.sent" {
		t.Fatalf("first event %s, want message.sent (order %v)", order[0], order)
	}
	m := mustCall(t, s, key, "GET", "/inboxes/"+esc(a)+"/messages/"+esc(mid), nil, 200)
	for _, l := range []string{"sent", "delivered", "bounced", "complained", "rejected"} {
		if !hasString(m.list("labels"), l) {
			t.Fatalf("sent message labels %v lack %s", m.list("labels"), l)
		}
	}
	// Hosted recipient got the same Message-ID; bcc is not visible there.
	got := mustCall(t, s, key, "GET", "/inboxes/"+esc(b)+"/messages/"+esc(mid), nil, 200)
	if !hasString(got.list("labels"), "received") || got.body["bcc"] != nil {
		t.Fatalf("hosted copy: %s", got.raw)
	}
	// External recipients land in the outbox.
	ob := control(t, s, "GET", "/_emulator/outbox?to=out@example.com", nil)
	if msgs := ob.list("messages"); len(msgs) != 1 || msgs[0].(map[string]any)["message_id"] != mid {
		t.Fatalf("outbox: %s", ob.raw)
	}
	if len(s.Outbox("", b)) != 0 {
		t.Fatal("outbox lists mail of the wrong inbox")
	}
	// Reply from b goes back to a, threaded on both sides.
	rep := mustCall(t, s, key, "POST", "/inboxes/"+esc(b)+"/messages/"+esc(mid)+"/reply", map[string]any{"text": "Re body"}, 200)
	th := mustCall(t, s, key, "GET", "/inboxes/"+esc(a)+"/threads/"+sent.str("thread_id"), nil, 200)
	if th.body["message_count"].(float64) != 2 || th.str("last_message_id") != rep.str("message_id") {
		t.Fatalf("sender thread: %s", th.raw)
	}
	// Control events label and notify.
	if r := control(t, s, "POST", "/_emulator/messages/"+esc(mid)+"/events", map[string]any{"type": "delayed"}); r.status != 200 {
		t.Fatalf("control event: %d %s", r.status, r.raw)
	}
	m = mustCall(t, s, key, "GET", "/inboxes/"+esc(a)+"/messages/"+esc(mid), nil, 200)
	if !hasString(m.list("labels"), "delayed") {
		t.Fatalf("delayed label missing: %v", m.list("labels"))
	}
	mustCall(t, s, key, "POST", "/inboxes/"+esc(a)+"/messages/send", map[string]any{"subject": "no recipients"}, 422)
	mustCall(t, s, key, "POST", "/inboxes/"+esc(a)+"/messages/send", map[string]any{"to": "not an address"}, 400)
	mustCall(t, s, key, "POST", "/inboxes/"+esc(a)+"/messages/"+esc(mid)+"/reply", map[string]any{"subject": "not allowed"}, 400)
}

func TestIdempotency(t *testing.T) {
	t.Parallel()
	s, key := startTest(t, Options{})
	a := createInbox(t, s, key, "idem")
	path := "/inboxes/" + esc(a) + "/messages/send"
	body := map[string]any{"to": "x@example.com", "subject": "s", "text": "t"}

	first := mustCall(t, s, key, "POST", path, body, 200, "Idempotency-Key", "key-1")
	// Same key, same body (different key order and whitespace) replays.
	again := mustCall(t, s, key, "POST", path, `{ "text":"t", "subject":"s", "to":"x@example.com" }`, 200, "Idempotency-Key", "key-1")
	if again.str("message_id") != first.str("message_id") || again.str("thread_id") != first.str("thread_id") {
		t.Fatalf("replay %s vs %s", again.raw, first.raw)
	}
	if n := len(s.Outbox("x@example.com", "")); n != 1 {
		t.Fatalf("replay sent a second email: outbox has %d", n)
	}
	r := mustCall(t, s, key, "POST", path, map[string]any{"to": "x@example.com", "subject": "other"}, 409, "Idempotency-Key", "key-1")
	if r.str("code") != "conflict" {
		t.Fatalf("conflict: %s", r.raw)
	}
	mustCall(t, s, key, "POST", path, body, 400, "Idempotency-Key", "")
	mustCall(t, s, key, "POST", path, body, 400, "Idempotency-Key", "bad key with spaces")
	// The key is org-scoped: another org may use it independently.
	_, other := s.CreateOrganization("other")
	ob := createInbox(t, s, other, "idem2")
	mustCall(t, s, other, "POST", "/inboxes/"+esc(ob)+"/messages/send", body, 200, "Idempotency-Key", "key-1")

	// A request still in flight answers 409 to a concurrent retry.
	s.AddFault(Fault{Match: FaultMatch{Operation: "send_message"}, DelayMS: 60000, Times: 1})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		req, _ := http.NewRequestWithContext(ctx, "POST", s.APIURL()+path, strings.NewReader(`{"to":"y@example.com"}`))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Idempotency-Key", "slow")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	waitFor(t, "the slow send to be stored", func() bool { return len(s.Outbox("y@example.com", "")) == 1 })
	r = mustCall(t, s, key, "POST", path, map[string]any{"to": "y@example.com"}, 409, "Idempotency-Key", "slow")
	if !strings.Contains(r.str("message"), "in progress") {
		t.Fatalf("in flight: %s", r.raw)
	}
	cancel() // the client gives up; the send completed server-side
	wg.Wait()
	waitFor(t, "the slow send to complete", func() bool {
		return doAPI(t, s, key, "POST", path, map[string]any{"to": "y@example.com"}, "Idempotency-Key", "slow").status == 200
	})
	if n := len(s.Outbox("y@example.com", "")); n != 1 {
		t.Fatalf("retry after completion sent again: %d", n)
	}
	// A failed send releases its key.
	mustCall(t, s, key, "POST", path, map[string]any{"subject": "nobody"}, 422, "Idempotency-Key", "failed")
	mustCall(t, s, key, "POST", path, body, 200, "Idempotency-Key", "failed")
}

// Retries of one send racing its first attempt, as a client with a short
// timeout makes them: every answer is the one message or "in progress",
// and one email is sent.
func TestIdempotencyUnderConcurrentRetries(t *testing.T) {
	t.Parallel()
	s, key := startTest(t, Options{})
	a := createInbox(t, s, key, "idemrace")
	path := "/inboxes/" + esc(a) + "/messages/send"
	body := map[string]any{"to": "race@example.com", "subject": "s", "text": "t"}
	var wg sync.WaitGroup
	ids := make(chan string, 64)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 4 {
				r := doAPI(t, s, key, "POST", path, body, "Idempotency-Key", "race-1")
				switch {
				case r.status == 200:
					ids <- r.str("message_id")
				case r.status == 409 && strings.Contains(r.str("message"), "in progress"):
				default:
					t.Errorf("retry answered %d: %s", r.status, r.raw)
				}
			}
		}()
	}
	wg.Wait()
	close(ids)
	seen := map[string]bool{}
	for id := range ids {
		seen[id] = true
	}
	if len(seen) != 1 {
		t.Errorf("retries of one send answered %d message ids, want 1", len(seen))
	}
	if n := len(s.Outbox("race@example.com", "")); n != 1 {
		t.Errorf("retries of one send sent %d emails, want 1", n)
	}
}

func TestFaultsAndRequestLog(t *testing.T) {
	t.Parallel()
	s, key := startTest(t, Options{})
	in := createInbox(t, s, key, "faults")

	id := control(t, s, "POST", "/_emulator/faults", map[string]any{
		"match": map[string]any{"operation": "list_inboxes"}, "status": 429, "code": "rate_limit_exceeded",
		"headers": map[string]string{"Retry-After": "9"}, "times": 2,
	})
	if id.str("id") == "" {
		t.Fatalf("fault id: %s", id.raw)
	}
	for i := 0; i < 2; i++ {
		r := mustCall(t, s, key, "GET", "/inboxes?limit=100", nil, 429)
		if r.str("code") != "rate_limit_exceeded" || r.header.Get("Retry-After") != "9" {
			t.Fatalf("fault %d: %s %v", i, r.raw, r.header)
		}
	}
	mustCall(t, s, key, "GET", "/inboxes", nil, 200) // times exhausted
	// every: only each third matching request fails; the others are served.
	control(t, s, "POST", "/_emulator/faults", map[string]any{"match": map[string]any{"operation": "list_inboxes"}, "status": 503,
		"every": 3, "times": 2})
	for _, want := range []int{200, 200, 503, 200, 200, 503, 200, 200, 200} {
		mustCall(t, s, key, "GET", "/inboxes", nil, want)
	}
	// Verbatim bodies, path prefixes and methods.
	control(t, s, "POST", "/_emulator/faults", map[string]any{"match": map[string]any{"method": "GET", "path_prefix": "/v0/inboxes/" + esc(in)}, "status": 503, "body": "upstream exploded"})
	r := mustCall(t, s, key, "GET", "/inboxes/"+esc(in), nil, 503)
	if string(r.raw) != "upstream exploded" {
		t.Fatalf("verbatim body: %q", r.raw)
	}
	if c := control(t, s, "DELETE", "/_emulator/faults", nil); c.status != 204 {
		t.Fatalf("clear faults: %d", c.status)
	}
	mustCall(t, s, key, "GET", "/inboxes/"+esc(in), nil, 200)

	// Stall: headers arrive, the body never finishes.
	control(t, s, "POST", "/_emulator/faults", map[string]any{"match": map[string]any{"operation": "get_inbox"}, "status": 500, "stall": true, "times": 1})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", s.APIURL()+"/inboxes/"+esc(in), nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("stalled request: headers should arrive: %v", err)
	}
	if resp.StatusCode != 500 {
		t.Fatalf("stall status %d", resp.StatusCode)
	}
	if _, err := io.ReadAll(resp.Body); err == nil {
		t.Fatal("stalled body finished")
	}
	resp.Body.Close()

	// The request log never records credentials.
	mustCall(t, s, key, "POST", "/inboxes/"+esc(in)+"/messages/send", map[string]any{"to": "z@example.com", "text": "secret-free"}, 200, "Idempotency-Key", "log-1")
	log := control(t, s, "GET", "/_emulator/requests?path_prefix=/v0/inboxes/"+esc(in)+"/messages", nil)
	if strings.Contains(string(log.raw), key) {
		t.Fatal("request log contains the API key")
	}
	reqs := log.list("requests")
	if len(reqs) != 1 {
		t.Fatalf("requests: %s", log.raw)
	}
	rec := reqs[0].(map[string]any)
	if rec["method"] != "POST" || rec["idempotency_key"] != "log-1" || rec["status"].(float64) != 200 || rec["body"].(map[string]any)["to"] != "z@example.com" {
		t.Fatalf("record: %v", rec)
	}
	if decoded := s.Requests("/v0/inboxes/faults@agentmail.to/messages"); len(decoded) != 1 {
		t.Fatalf("decoded prefix matched %d", len(decoded))
	}
}

func TestAttachmentsAndRaw(t *testing.T) {
	t.Parallel()
	s, key := startTest(t, Options{})
	in := createInbox(t, s, key, "files")
	d := deliver(t, s, in, map[string]any{"from": "a@example.com", "subject": "doc", "text": "see attached",
		"attachments": []map[string]string{{"filename": "r.pdf", "content_type": "application/pdf", "content_base64": "JVBERi0xLjQ="}}})
	m := mustCall(t, s, key, "GET", "/inboxes/"+esc(in)+"/messages/"+esc(d.MessageID), nil, 200)
	att := m.list("attachments")[0].(map[string]any)
	if att["filename"] != "r.pdf" || att["size"].(float64) != 8 {
		t.Fatalf("attachment: %v", att)
	}
	loc := mustCall(t, s, key, "GET", "/inboxes/"+esc(in)+"/messages/"+esc(d.MessageID)+"/attachments/"+att["attachment_id"].(string), nil, 200)
	exp, err := time.Parse(time.RFC3339, loc.str("expires_at"))
	if err != nil || !exp.After(time.Now()) {
		t.Fatalf("expires_at: %s", loc.raw)
	}
	resp, err := http.Get(loc.str("download_url"))
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(data) != "%PDF-1.4" || resp.Header.Get("Content-Type") != "application/pdf" {
		t.Fatalf("download: %q %v", data, resp.Header)
	}
	if r, _ := http.Get(s.URL() + "/_files/nope"); r.StatusCode != 403 {
		t.Fatalf("unknown file token: %d", r.StatusCode)
	}
	mustCall(t, s, key, "GET", "/inboxes/"+esc(in)+"/messages/"+esc(d.MessageID)+"/attachments/att_missing", nil, 404)
	raw := mustCall(t, s, key, "GET", "/inboxes/"+esc(in)+"/messages/"+esc(d.MessageID)+"/raw", nil, 200)
	resp, err = http.Get(raw.str("download_url"))
	if err != nil {
		t.Fatal(err)
	}
	eml, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	parsed, err := parseMIME(eml)
	if err != nil || parsed.subject != "doc" || len(parsed.attachments) != 1 || strings.TrimSpace(parsed.text) != "see attached" {
		t.Fatalf("raw round trip: %v %+v", err, parsed)
	}
}

func TestWebhookCRUD(t *testing.T) {
	t.Parallel()
	s, key := startTest(t, Options{})
	in := createInbox(t, s, key, "hooks")
	wh := mustCall(t, s, key, "POST", "/inboxes/"+esc(in)+"/webhooks", map[string]any{"url": "https://example.invalid/h", "event_types": []string{"message.received"}, "client_id": "w1"}, 200)
	if !strings.HasPrefix(wh.str("secret"), "whsec_") || !hasString(wh.list("inbox_ids"), in) || wh.body["enabled"] != true {
		t.Fatalf("webhook: %s", wh.raw)
	}
	mustCall(t, s, key, "POST", "/inboxes/"+esc(in)+"/webhooks", map[string]any{"url": "https://example.invalid/h", "event_types": []string{"message.nope"}}, 400)
	list := mustCall(t, s, key, "GET", "/webhooks", nil, 200)
	if len(list.list("webhooks")) != 1 || list.list("webhooks")[0].(map[string]any)["secret"] == nil {
		t.Fatalf("list: %s", list.raw)
	}
	// Spam variants need the label permission.
	k := mustCall(t, s, key, "POST", "/inboxes/"+esc(in)+"/api-keys", map[string]any{"permissions": map[string]bool{"webhook_create": true}}, 200)
	r := mustCall(t, s, k.str("api_key"), "POST", "/inboxes/"+esc(in)+"/webhooks", map[string]any{"url": "https://example.invalid/s", "event_types": []string{"message.received.spam"}}, 403)
	if r.str("message") != "label_spam_read is forbidden" {
		t.Fatalf("spam webhook: %s", r.raw)
	}
	// Inbox keys manage webhooks only through their inbox path.
	mustCall(t, s, k.str("api_key"), "POST", "/webhooks", map[string]any{"url": "https://example.invalid/o", "event_types": []string{"message.sent"}}, 403)
	mustCall(t, s, key, "DELETE", "/inboxes/"+esc(in)+"/webhooks/"+wh.str("webhook_id"), nil, 204)
	mustCall(t, s, key, "DELETE", "/inboxes/"+esc(in)+"/webhooks/"+wh.str("webhook_id"), nil, 404)
}
