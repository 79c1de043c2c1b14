package emulator

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/paperclipai/paperclipai/internal/golden"
)

// TestWireGolden pins the emulator's wire JSON: the provider answers our
// client and the official SDK parse. A scripted exchange (create an inbox,
// receive a message, list and read it, read its thread, reply, the
// WebSocket-free error shapes) is rendered with its statuses and bodies;
// ids and times are replaced by stable placeholders so that only a change
// of shape or field set shows up as a diff of testdata/wire.golden.
func TestWireGolden(t *testing.T) {
	s, key := startTest(t, Options{DeliveryDelay: -1})
	var out bytes.Buffer
	norm := newNormalizer()
	record := func(name string, r apiResp) {
		fmt.Fprintf(&out, "== %s\nstatus %d\n%s\n\n", name, r.status, norm.json(t, r.raw))
	}
	frame := func(name string, f map[string]any) {
		raw, err := json.Marshal(f)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&out, "== websocket: %s\n%s\n\n", name, norm.json(t, raw))
	}

	inbox := mustCall(t, s, key, "POST", "/inboxes", map[string]any{"username": "golden", "display_name": "Golden"}, 200)
	record("POST /inboxes", inbox)
	id := inbox.str("inbox_id")
	ws := dialWS(t, s, key)
	frame("subscribed", ws.subscribe(t, map[string]any{"type": "subscribe", "inbox_ids": []string{id}}))
	record("GET /inboxes/{inbox_id}", mustCall(t, s, key, "GET", "/inboxes/"+esc(id), nil, 200))

	got, err := s.Deliver(id, DeliverRequest{
		From: "Sender <sender@example.com>", Subject: "Hello", Text: "Can you help?\n\n> quoted",
		HTML: "<p>Can you help?</p>", Cc: []string{"cc@example.com"},
	})
	if err != nil {
		t.Fatal(err)
	}
	frame("message.received", ws.next(t))
	record("GET /inboxes/{inbox_id}/messages", mustCall(t, s, key, "GET", "/inboxes/"+esc(id)+"/messages", nil, 200))
	record("GET /inboxes/{inbox_id}/messages/{message_id}", mustCall(t, s, key, "GET", "/inboxes/"+esc(id)+"/messages/"+esc(got.MessageID), nil, 200))
	record("GET /inboxes/{inbox_id}/threads/{thread_id}", mustCall(t, s, key, "GET", "/inboxes/"+esc(id)+"/threads/"+esc(got.ThreadID), nil, 200))
	record("POST /inboxes/{inbox_id}/messages/{message_id}/reply", mustCall(t, s, key, "POST",
		"/inboxes/"+esc(id)+"/messages/"+esc(got.MessageID)+"/reply", map[string]any{"text": "Sure."}, 200,
		"Idempotency-Key", "golden-reply-1"))
	// Receipts of the reply: sent first, then delivered (no delay).
	for _, want := range []string{"message.sent", "message.delivered"} {
		f := ws.next(t)
		if f["event_type"] != want {
			t.Fatalf("frame %v, want %s", f["event_type"], want)
		}
		frame(want, f)
	}

	record("error: unknown inbox", doAPI(t, s, key, "GET", "/inboxes/"+esc("nobody@agentmail.to"), nil))
	record("error: taken address", doAPI(t, s, key, "POST", "/inboxes", map[string]any{"username": "golden"}))
	record("error: malformed body", doAPI(t, s, key, "POST", "/inboxes", "{"))
	record("error: no key", doAPI(t, s, "", "GET", "/inboxes", nil))

	golden.Check(t, filepath.Join("testdata", "wire.golden"), out.Bytes())
}

// normalizer replaces volatile values with placeholders numbered in order
// of first appearance, so equal ids stay visibly equal in the golden file.
type normalizer struct {
	seen map[string]string
	n    map[string]int
}

func newNormalizer() *normalizer {
	return &normalizer{seen: map[string]string{}, n: map[string]int{}}
}

var (
	uuidRE  = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	timeRE  = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$`)
	msgIDRE = regexp.MustCompile(`<[^<>@\s]+@[^<>\s]+>`)
	// Provider-style ids such as thd_… carry random suffixes.
	prefixedRE = regexp.MustCompile(`\b[a-z]{2,5}_[a-z0-9]{12,}\b`)
)

// volatileNumbers are fields whose value depends on random ids (a raw
// message's size includes its generated Message-ID).
var volatileNumbers = map[string]bool{"size": true}

func (n *normalizer) placeholder(kind, v string) string {
	if p, ok := n.seen[v]; ok {
		return p
	}
	n.n[kind]++
	p := fmt.Sprintf("<%s%d>", kind, n.n[kind])
	n.seen[v] = p
	return p
}

func (n *normalizer) value(v any) any {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if _, isNum := x[k].(float64); isNum && volatileNumbers[k] {
				x[k] = "<n>"
				continue
			}
			x[k] = n.value(x[k])
		}
		return x
	case []any:
		for i := range x {
			x[i] = n.value(x[i])
		}
		return x
	case string:
		if timeRE.MatchString(x) {
			return "<time>"
		}
		x = msgIDRE.ReplaceAllStringFunc(x, func(m string) string { return n.placeholder("msgid", m) })
		if strings.HasPrefix(x, "am_") {
			return "<key>"
		}
		x = uuidRE.ReplaceAllStringFunc(x, func(m string) string { return n.placeholder("id", m) })
		x = prefixedRE.ReplaceAllStringFunc(x, func(m string) string { return n.placeholder(m[:strings.IndexByte(m, '_')], m) })
		return x
	default:
		return v
	}
}

// json renders raw as indented JSON with placeholders, or as the raw text
// when it is not JSON (the shape of a non-JSON answer matters too).
func (n *normalizer) json(t *testing.T, raw []byte) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return strings.TrimSpace(string(raw))
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(n.value(v)); err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(buf.String())
}
