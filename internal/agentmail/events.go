package agentmail

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// ErrInvalidEvent is matched by the error [NormalizeEvent] returns for a
// payload that names one of the channel event kinds but cannot be admitted
// (not a JSON object, or no usable inbox_id / message_id reference).
var ErrInvalidEvent = errors.New("agentmail: invalid event")

// Event is the normalized form of an AgentMail event, identical for
// WebSocket frames and webhook deliveries (docs/email-pipeline.md, "The provider client"). Admission stores
// it as the delivery's normalized event; the JSON names of the first four
// fields match the reference implementation.
type Event struct {
	// Kind is one of the six channel event types (see [ChannelEventTypes]).
	Kind string `json:"kind"`
	// InboxID is the inbox the event belongs to; admission compares it with
	// the endpoint's address.
	InboxID string `json:"inbox_id"`
	// MessageID is the provider message id the event refers to.
	MessageID string `json:"message_id"`
	// EventID is the provider event id, or "<kind>:<message_id>" when the
	// payload has none.
	EventID string `json:"eventId"`
	// ThreadID is the provider thread id, when present.
	ThreadID string `json:"thread_id,omitempty"`
	// Labels are the message labels of a message.received event.
	Labels []string `json:"labels,omitempty"`
	// Timestamp is the reference's timestamp (the sender's Date for
	// received mail, the receipt time for receipts); zero when absent or
	// not RFC 3339.
	Timestamp time.Time `json:"timestamp,omitzero"`
	// CreatedAt is the message's created_at (AgentMail's receipt time) of a
	// message.received event; zero when absent or not RFC 3339.
	CreatedAt time.Time `json:"created_at,omitzero"`
	// Recipients are the recipient addresses of a sent, delivered,
	// complained or bounced receipt.
	Recipients []string `json:"recipients,omitempty"`
	// BounceRecipients carry the per-recipient status of a bounce.
	BounceRecipients []BounceRecipient `json:"bounce_recipients,omitempty"`
	// ReceiptType and ReceiptSubType classify a bounce or complaint (for
	// example "Permanent"/"General").
	ReceiptType    string `json:"receipt_type,omitempty"`
	ReceiptSubType string `json:"receipt_sub_type,omitempty"`
	// RejectReason is the provider's reason for a rejection. It is provider
	// text: store or display it, never put it into an error or log.
	RejectReason string `json:"reject_reason,omitempty"`
}

// DedupKey returns the delivery deduplication key "<kind>:<message_id>".
func (e *Event) DedupKey() string { return e.Kind + ":" + e.MessageID }

// referenceField maps an event kind to the envelope member holding its
// message reference.
var referenceField = map[string]string{
	EventMessageReceived:   "message",
	EventMessageSent:       "send",
	EventMessageDelivered:  "delivery",
	EventMessageBounced:    "bounce",
	EventMessageComplained: "complaint",
	EventMessageRejected:   "reject",
}

// IsChannelEvent reports whether kind is one of the six event types the
// channel admits.
func IsChannelEvent(kind string) bool {
	_, ok := referenceField[kind]
	return ok
}

// NormalizeEvent turns a raw WebSocket frame or webhook body into an
// [Event]. Both envelope styles are accepted: {"type":"event",
// "event_type":"message.sent", "send":{...}} and {"type":"message_sent",
// "send":{...}}; the kind comes from event_type, else from type with
// "message_" rewritten to "message.".
//
// It returns (nil, nil) for frames that are not one of the six channel
// events, such as {"type":"subscribed"} or domain.verified. It returns an
// error matching [ErrInvalidEvent] when the payload is not a JSON object or
// a channel event lacks a non-empty string inbox_id or message_id in its
// reference (the kind-specific member send, delivery, bounce, complaint or
// reject for receipts, falling back to message; message for received mail).
// The error text never quotes the payload. Decoding is key-exact and keeps
// the last of duplicate keys, like JSON.parse in the reference.
func NormalizeEvent(raw []byte) (*Event, error) {
	var env map[string]json.RawMessage
	if err := json.Unmarshal(raw, &env); err != nil || env == nil {
		return nil, fmt.Errorf("%w: payload is not a JSON object", ErrInvalidEvent)
	}
	kind := eventKind(env)
	field, ok := referenceField[kind]
	if !ok {
		return nil, nil
	}
	refRaw := env[field]
	if isJSONNull(refRaw) && field != "message" {
		refRaw = env["message"]
	}
	var ref map[string]json.RawMessage
	if isJSONNull(refRaw) || json.Unmarshal(refRaw, &ref) != nil || ref == nil {
		return nil, fmt.Errorf("%w: %s event without a %s object", ErrInvalidEvent, kind, field)
	}
	ev := &Event{Kind: kind}
	ev.InboxID, _ = jsonString(ref["inbox_id"])
	ev.MessageID, _ = jsonString(ref["message_id"])
	if ev.InboxID == "" || ev.MessageID == "" {
		return nil, fmt.Errorf("%w: %s event without inbox_id or message_id", ErrInvalidEvent, kind)
	}
	// An empty event id is treated as missing: admission deduplicates on
	// it, and "" would collide across unrelated events.
	if id, ok := jsonString(env["event_id"]); ok && id != "" {
		ev.EventID = id
	} else {
		ev.EventID = ev.DedupKey()
	}
	ev.ThreadID, _ = jsonString(ref["thread_id"])
	ev.Timestamp = jsonTime(ref["timestamp"])

	switch kind {
	case EventMessageReceived:
		ev.Labels = jsonStrings(ref["labels"])
		ev.CreatedAt = jsonTime(ref["created_at"])
	case EventMessageBounced:
		var rcpts []json.RawMessage
		if json.Unmarshal(ref["recipients"], &rcpts) == nil {
			for _, r := range rcpts {
				var obj map[string]json.RawMessage
				if json.Unmarshal(r, &obj) != nil || obj == nil {
					continue
				}
				addr, _ := jsonString(obj["address"])
				status, _ := jsonString(obj["status"])
				if addr == "" {
					continue
				}
				ev.Recipients = append(ev.Recipients, addr)
				ev.BounceRecipients = append(ev.BounceRecipients, BounceRecipient{Address: addr, Status: status})
			}
		}
		ev.ReceiptType, _ = jsonString(ref["type"])
		ev.ReceiptSubType, _ = jsonString(ref["sub_type"])
	case EventMessageComplained:
		ev.Recipients = jsonStrings(ref["recipients"])
		ev.ReceiptType, _ = jsonString(ref["type"])
		ev.ReceiptSubType, _ = jsonString(ref["sub_type"])
	case EventMessageRejected:
		ev.RejectReason, _ = jsonString(ref["reason"])
	default:
		ev.Recipients = jsonStrings(ref["recipients"])
	}
	return ev, nil
}

// eventKind reads the event kind: event_type when present and not null,
// else type with the first "message_" rewritten to "message.". A
// non-string value yields "" (not a channel event).
func eventKind(env map[string]json.RawMessage) string {
	if raw, ok := env["event_type"]; ok && !isJSONNull(raw) {
		s, _ := jsonString(raw)
		return s
	}
	s, _ := jsonString(env["type"])
	return strings.Replace(s, "message_", "message.", 1)
}

func isJSONNull(raw json.RawMessage) bool {
	return len(bytes.TrimSpace(raw)) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null"))
}

// jsonString decodes raw when it is a JSON string.
func jsonString(raw json.RawMessage) (string, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '"' {
		return "", false
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// jsonStrings decodes the string elements of a JSON array, skipping
// anything else.
func jsonStrings(raw json.RawMessage) []string {
	var items []json.RawMessage
	if json.Unmarshal(raw, &items) != nil {
		return nil
	}
	var out []string
	for _, it := range items {
		if s, ok := jsonString(it); ok {
			out = append(out, s)
		}
	}
	return out
}

// jsonTime parses an RFC 3339 string; anything else is the zero time.
// Timestamps are informational here, so a bad one must not block admission.
func jsonTime(raw json.RawMessage) time.Time {
	s, ok := jsonString(raw)
	if !ok {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}
	}
	return t
}
