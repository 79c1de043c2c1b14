package receive

import (
	"testing"

	"github.com/paperclipai/paperclipai/internal/agentmail"
	"github.com/paperclipai/paperclipai/internal/inbound/queue"
)

// The loop guards and provider filters are pure functions of one message;
// each row is a message a sender (or a mail system) can send, and what the
// guard must conclude about it (docs/email-pipeline.md, "Receiving rules").

func TestAutomatic(t *testing.T) {
	for _, tc := range []struct {
		name    string
		from    string
		headers map[string]string
		want    bool
	}{
		{"a person", "Ann <ann@example.com>", nil, false},
		{"Auto-Submitted: no is a person", "ann@example.com", map[string]string{"Auto-Submitted": "no"}, false},
		{"Auto-Submitted: No, spaced", "ann@example.com", map[string]string{"auto-submitted": "  No "}, false},
		{"Auto-Submitted: auto-replied", "ann@example.com", map[string]string{"Auto-Submitted": "auto-replied"}, true},
		{"Auto-Submitted: auto-generated", "ann@example.com", map[string]string{"Auto-Submitted": "auto-generated"}, true},
		{"Auto-Submitted empty", "ann@example.com", map[string]string{"Auto-Submitted": ""}, true},
		{"Precedence: bulk", "news@example.com", map[string]string{"Precedence": "bulk"}, true},
		{"Precedence: list", "list@example.com", map[string]string{"Precedence": "List"}, true},
		{"Precedence: junk", "x@example.com", map[string]string{"Precedence": "junk"}, true},
		{"Precedence: first-class is a person", "x@example.com", map[string]string{"Precedence": "first-class"}, false},
		{"X-Autoreply", "x@example.com", map[string]string{"X-Autoreply": "yes"}, true},
		{"X-Autorespond", "x@example.com", map[string]string{"X-Autorespond": "1"}, true},
		{"delivery status report", "x@example.com", map[string]string{"Content-Type": `multipart/report; report-type=delivery-status; boundary="b"`}, true},
		{"malformed report content type", "x@example.com", map[string]string{"Content-Type": "multipart/report; ;;=broken"}, true},
		{"multipart/mixed is a person", "x@example.com", map[string]string{"Content-Type": "multipart/mixed; boundary=b"}, false},
		{"mailer-daemon", "MAILER-DAEMON@mx.example.com", nil, true},
		{"postmaster", "Mail System <postmaster@example.com>", nil, true},
		{"postmaster as a display name only", "postmaster <ann@example.com>", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &agentmail.Message{From: tc.from, Headers: tc.headers}
			if got := automatic(m); got != tc.want {
				t.Errorf("automatic(from %q, %v) = %v, want %v", tc.from, tc.headers, got, tc.want)
			}
		})
	}
}

func TestProviderFiltered(t *testing.T) {
	for _, tc := range []struct {
		labels []string
		want   bool
	}{
		{nil, false},
		{[]string{"received", "unread"}, false},
		{[]string{"received", "spam"}, true},
		{[]string{"BLOCKED"}, true},
		{[]string{"unauthenticated"}, true},
		{[]string{"trash"}, true},
		{[]string{"spammy"}, false},
	} {
		if got := queue.ProviderFiltered(&agentmail.Message{Labels: tc.labels}); got != tc.want {
			t.Errorf("queue.ProviderFiltered(%v) = %v, want %v", tc.labels, got, tc.want)
		}
	}
}

func TestOwn(t *testing.T) {
	const inbox = "bot@agentmail.to"
	for _, tc := range []struct {
		name      string
		from      string
		labels    []string
		headers   map[string]string
		published bool
		want      bool
	}{
		{"a person", "ann@example.com", []string{"received"}, nil, false, false},
		{"the provider's sent label", "bot@agentmail.to", []string{"sent"}, nil, false, true},
		{"one of our publications", "bot@agentmail.to", nil, nil, true, true},
		{"mail from the inbox's own address", "Bot <BOT@agentmail.to>", []string{"received"}, nil, false, true},
		{"a forged publication header alone proves nothing", "eve@example.com", []string{"received"},
			map[string]string{PublicationHeader: "0190a3c1-2b7c-7e2d-9f7a-1a2b3c4d5e6f"}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &agentmail.Message{From: tc.from, Labels: tc.labels, Headers: tc.headers}
			if got := own(m, inbox, tc.published); got != tc.want {
				t.Errorf("own = %v, want %v", got, tc.want)
			}
		})
	}
	if own(&agentmail.Message{From: "ann@example.com"}, "", false) {
		t.Error("an inbox without an address claimed a stranger's mail")
	}
}

func TestSenderAddress(t *testing.T) {
	for in, want := range map[string]string{
		"Ann <Ann@Example.com>":          "ann@example.com",
		"ann@example.com":                "ann@example.com",
		`"Doe, Jane" <jane@example.org>`: "jane@example.org",
		"broken <x@y.z":                  "x@y.z",
		"  plain@host  ":                 "plain@host",
	} {
		if got := queue.SenderAddress(in); got != want {
			t.Errorf("queue.SenderAddress(%q) = %q, want %q", in, got, want)
		}
	}
}
