package agentmail

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestNormalizeEventKinds: the six channel event types normalize in both
// envelope styles, and other types are not channel events.
func TestNormalizeEventKinds(t *testing.T) {
	t.Parallel()
	msg := `"message":{"inbox_id":"agent@agentmail.to","thread_id":"thd_1","message_id":"<m1@x>","labels":["received","unread"],"timestamp":"2026-01-02T03:04:05Z","created_at":"2026-01-02T03:04:07.5Z"}`
	for _, raw := range []string{
		`{"type":"event","event_type":"message.received","event_id":"evt_1",` + msg + `}`,
		`{"type":"message_received","event_id":"evt_1",` + msg + `}`,
	} {
		ev, err := NormalizeEvent([]byte(raw))
		if err != nil || ev == nil {
			t.Fatalf("%s: %v %v", raw, ev, err)
		}
		want := &Event{
			Kind: EventMessageReceived, InboxID: "agent@agentmail.to", MessageID: "<m1@x>", EventID: "evt_1",
			ThreadID: "thd_1", Labels: []string{"received", "unread"},
			Timestamp: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), CreatedAt: time.Date(2026, 1, 2, 3, 4, 7, 5e8, time.UTC),
		}
		if !reflect.DeepEqual(ev, want) {
			t.Fatalf("got %+v\nwant %+v", ev, want)
		}
	}

	ev, err := NormalizeEvent([]byte(`{"type":"message_delivered","delivery":{"inbox_id":"a@b.c","message_id":"<m2@x>","recipients":["r@x.y"]}}`))
	if err != nil || ev.Kind != EventMessageDelivered || ev.EventID != "message.delivered:<m2@x>" || ev.DedupKey() != "message.delivered:<m2@x>" {
		t.Fatalf("delivered: %+v %v", ev, err)
	}

	for _, raw := range []string{
		`{"type":"subscribed"}`,
		`{"type":"subscribed","inbox_ids":["a@b.c"],"event_types":["message.received"]}`,
		`{"type":"event","event_type":"domain.verified","event_id":"e","domain":{}}`,
		`{"type":"event","event_type":"message.received.spam","message":{"inbox_id":"a","message_id":"m"}}`,
		`{"type":"event","event_type":"message.opened","open":{"inbox_id":"a","message_id":"m"}}`,
		`{"type":"error","name":"ForbiddenError","message":"x"}`,
		`{"event_type":7,"type":"message_received","message":{"inbox_id":"a","message_id":"m"}}`,
		`{"type":"MESSAGE_RECEIVED","message":{"inbox_id":"a","message_id":"m"}}`,
		`{"Event_Type":"message.received","message":{"inbox_id":"a","message_id":"m"}}`,
		`{}`,
	} {
		ev, err := NormalizeEvent([]byte(raw))
		if ev != nil || err != nil {
			t.Errorf("%s: got %+v, %v; want nil, nil", raw, ev, err)
		}
	}

	for _, raw := range []string{
		`{"type":"event","event_type":"message.received","message":{}}`,
		`{"type":"message_received"}`,
		`{"type":"message_received","message":null}`,
		`{"type":"message_received","message":"x"}`,
		`{"type":"message_received","message":{"inbox_id":"a"}}`,
		`{"type":"message_received","message":{"message_id":"m"}}`,
		`{"type":"message_received","message":{"inbox_id":"","message_id":"m"}}`,
		`{"type":"message_received","message":{"inbox_id":5,"message_id":"m"}}`,
		`{"type":"message_sent","send":{"inbox_id":"a"}}`,
		`[]`,
		`null`,
		`"message.received"`,
		`{"type":"message_received",`,
		``,
	} {
		ev, err := NormalizeEvent([]byte(raw))
		if ev != nil || !errors.Is(err, ErrInvalidEvent) {
			t.Errorf("%s: got %+v, %v; want ErrInvalidEvent", raw, ev, err)
		}
	}
}

// TestNormalizeReceipts: every receipt kind in both
// envelope styles yields {kind, inbox_id, message_id, eventId}.
func TestNormalizeReceipts(t *testing.T) {
	t.Parallel()
	receipts := []struct{ kind, wsType, field, extra string }{
		{EventMessageSent, "message_sent", "send", `"recipients":["r1@x.y","r2@x.y"]`},
		{EventMessageDelivered, "message_delivered", "delivery", `"recipients":["r1@x.y"]`},
		{EventMessageBounced, "message_bounced", "bounce", `"type":"Permanent","sub_type":"General","recipients":[{"address":"r1@x.y","status":"bounced"}]`},
		{EventMessageComplained, "message_complained", "complaint", `"type":"abuse","sub_type":"spam","recipients":["r1@x.y"]`},
		{EventMessageRejected, "message_rejected", "reject", `"reason":"blocked recipient"`},
	}
	for _, r := range receipts {
		ref := fmt.Sprintf(`{"inbox_id":"agent@agentmail.to","thread_id":"thd_9","message_id":"<out@agentmail.to>","timestamp":"2026-02-03T04:05:06Z",%s}`, r.extra)
		envelopes := []string{
			fmt.Sprintf(`{"type":"event","event_type":%q,"event_id":"evt_%s",%q:%s}`, r.kind, r.field, r.field, ref),
			fmt.Sprintf(`{"type":%q,"event_id":"evt_%s",%q:%s}`, r.wsType, r.field, r.field, ref),
		}
		for _, raw := range envelopes {
			ev, err := NormalizeEvent([]byte(raw))
			if err != nil || ev == nil {
				t.Fatalf("%s: %v", raw, err)
			}
			if ev.Kind != r.kind || ev.InboxID != "agent@agentmail.to" || ev.MessageID != "<out@agentmail.to>" ||
				ev.EventID != "evt_"+r.field || ev.ThreadID != "thd_9" || ev.Timestamp.IsZero() {
				t.Errorf("%s: got %+v", raw, ev)
			}
			switch r.kind {
			case EventMessageSent:
				if strings.Join(ev.Recipients, ",") != "r1@x.y,r2@x.y" {
					t.Errorf("sent recipients %v", ev.Recipients)
				}
			case EventMessageBounced:
				if ev.ReceiptType != "Permanent" || ev.ReceiptSubType != "General" ||
					!reflect.DeepEqual(ev.BounceRecipients, []BounceRecipient{{"r1@x.y", "bounced"}}) ||
					!reflect.DeepEqual(ev.Recipients, []string{"r1@x.y"}) {
					t.Errorf("bounce %+v", ev)
				}
			case EventMessageComplained:
				if ev.ReceiptType != "abuse" || len(ev.Recipients) != 1 {
					t.Errorf("complaint %+v", ev)
				}
			case EventMessageRejected:
				if ev.RejectReason != "blocked recipient" {
					t.Errorf("reject %+v", ev)
				}
			}
		}
	}
	// A receipt without the kind-specific member falls back to "message";
	// an empty event id is replaced by the dedup key.
	ev, err := NormalizeEvent([]byte(`{"type":"event","event_type":"message.sent","event_id":"","message":{"inbox_id":"a@b.c","message_id":"<m>"}}`))
	if err != nil || ev.EventID != "message.sent:<m>" {
		t.Fatalf("fallback: %+v %v", ev, err)
	}
}

// TestNormalizedEventJSON pins the stored JSON names of the core fields.
func TestNormalizedEventJSON(t *testing.T) {
	t.Parallel()
	ev := Event{Kind: EventMessageSent, InboxID: "a@b.c", MessageID: "<m>", EventID: "evt"}
	b, _ := json.Marshal(ev)
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"kind": "message.sent", "inbox_id": "a@b.c", "message_id": "<m>", "eventId": "evt"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s", b)
	}
}

func TestNormalizeErrorIsLogSafe(t *testing.T) {
	t.Parallel()
	_, err := NormalizeEvent([]byte(`{"type":"message_received","message":{"inbox_id":"SECRET@x.y","subject":"SECRET"}}`))
	if err == nil || strings.Contains(err.Error(), "SECRET") {
		t.Fatalf("err = %v", err)
	}
}

// FuzzNormalizeEvent checks that normalization never panics and that every
// admitted event has its required fields and a stable identity.
func FuzzNormalizeEvent(f *testing.F) {
	seeds := []string{
		`{"type":"event","event_type":"message.received","event_id":"evt_1","message":{"inbox_id":"a@b.c","thread_id":"t","message_id":"<m>","labels":["received"],"timestamp":"2026-01-02T03:04:05Z"}}`,
		`{"type":"message_sent","send":{"inbox_id":"a@b.c","message_id":"<m>","recipients":["x@y.z"]}}`,
		`{"type":"event","event_type":"message.bounced","bounce":{"inbox_id":"a","message_id":"m","recipients":[{"address":"x","status":"bounced"},5,null]}}`,
		`{"type":"subscribed"}`,
		`{"type":"message_received","message":{}}`,
		`[1,2,3]`,
		`null`,
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		ev, err := NormalizeEvent(raw)
		if err != nil {
			if ev != nil {
				t.Fatal("event returned with an error")
			}
			if !errors.Is(err, ErrInvalidEvent) {
				t.Fatalf("unexpected error type %v", err)
			}
			return
		}
		if ev == nil {
			return
		}
		if !IsChannelEvent(ev.Kind) || ev.InboxID == "" || ev.MessageID == "" || ev.EventID == "" {
			t.Fatalf("incomplete event %+v", ev)
		}
		if _, err := json.Marshal(ev); err != nil {
			t.Fatalf("event not serializable: %v", err)
		}
	})
}
