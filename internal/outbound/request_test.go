package outbound

import (
	"strings"
	"testing"
)

func ptr[T any](v T) *T { return &v }

const uuid1 = "11111111-1111-4111-8111-111111111111"
const uuid2 = "22222222-2222-4222-8222-222222222222"

func TestValidate(t *testing.T) {
	newEmail := func() SendRequest {
		return SendRequest{EndpointID: uuid1, ParentIssueID: uuid2, To: []string{" a@example.com "}, Subject: ptr(" Hi "),
			Text: " hello ", IdempotencyKey: uuid1}
	}
	reply := func() SendRequest {
		return SendRequest{EndpointID: uuid1, ConversationID: uuid2, ReplyToMessageID: "<m1@x>", Text: "ok", IdempotencyKey: uuid1}
	}
	ok := newEmail()
	if err := ok.Validate(); err != nil || ok.To[0] != "a@example.com" || *ok.Subject != "Hi" || ok.Text != "hello" || ok.AttachmentIDs == nil {
		t.Fatalf("valid new email: %v %+v", err, ok)
	}
	tabs := newEmail()
	tabs.Text = "col1\tcol2\r\nline two\n"
	if err := tabs.Validate(); err != nil {
		t.Fatalf("tabs and line breaks stay allowed in text: %v", err)
	}
	r := reply()
	if err := r.Validate(); err != nil || r.ReplyAll == nil || *r.ReplyAll {
		t.Fatalf("a reply defaults replyAll to false: %v", err)
	}
	cases := []struct {
		name string
		mut  func() SendRequest
		want string
	}{
		{"CRLF header injection in subject", func() SendRequest { r := newEmail(); r.Subject = ptr("Hi\r\nBcc: x@evil.test"); return r }, "line break"},
		{"LF in subject", func() SendRequest { r := newEmail(); r.Subject = ptr("Hi\nthere"); return r }, "line break"},
		{"reply with bcc", func() SendRequest { r := reply(); r.Bcc = []string{"b@example.com"}; return r }, "A reply cannot set bcc: reply recipients"},
		// Issue 16 item 7: the error names the field, not only recipients.
		{"reply with subject", func() SendRequest { r := reply(); r.Subject = ptr("x"); return r }, "A reply cannot set subject: "},
		{"reply with to and subject", func() SendRequest { r := reply(); r.To = []string{"a@example.com"}; r.Subject = ptr("x"); return r },
			"A reply cannot set to, subject: "},
		{"reply without message id", func() SendRequest { r := reply(); r.ReplyToMessageID = ""; return r }, "exact message ID"},
		{"new email without recipient", func() SendRequest { r := newEmail(); r.To = nil; return r }, "parent task, recipient, and subject; missing: to"},
		{"new email with replyAll", func() SendRequest { r := newEmail(); r.ReplyAll = ptr(true); return r }, "cannot be a reply: replyAll needs conversationId"},
		{"bad address", func() SendRequest { r := newEmail(); r.To = []string{"not an address"}; return r }, "invalid email address"},
		{"too many recipients", func() SendRequest { r := newEmail(); r.To = make([]string, 51); return r }, "at most 50"},
		{"empty text", func() SendRequest { r := newEmail(); r.Text = "   "; return r }, "text is required"},
		{"huge text", func() SendRequest { r := newEmail(); r.Text = strings.Repeat("a", 100_001); return r }, "text is required"},
		{"bad key", func() SendRequest { r := newEmail(); r.IdempotencyKey = "k1"; return r }, "idempotencyKey"},
		{"too many attachments", func() SendRequest { r := newEmail(); r.AttachmentIDs = make([]string, 21); return r }, "at most 20"},
		// Issue 9 item 13: control characters are refused (NUL breaks the
		// PostgreSQL insert); text keeps its tabs and line breaks.
		{"NUL in subject", func() SendRequest { r := newEmail(); r.Subject = ptr("Hi\x00"); return r }, "NUL"},
		{"escape in subject", func() SendRequest { r := newEmail(); r.Subject = ptr("Hi\x1b[2J"); return r }, "control character"},
		{"NUL in text", func() SendRequest { r := newEmail(); r.Text = "a\x00b"; return r }, "NUL"},
		{"bell in text", func() SendRequest { r := newEmail(); r.Text = "a\ab"; return r }, "control character"},
		{"C1 in address", func() SendRequest { r := newEmail(); r.To = []string{"a\u0085b@example.com"}; return r }, "invalid email address"},
		{"NUL in reply message id", func() SendRequest { r := reply(); r.ReplyToMessageID = "<m1@x>\x00"; return r }, "control characters"},
	}
	for _, c := range cases {
		req := c.mut()
		if err := req.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.name, err, c.want)
		}
	}
}

func TestReplyRecipients(t *testing.T) {
	own := "Bot <bot@agentmail.to>"
	// Reply goes to Reply-To when present, else From.
	to, cc := ReplyRecipients("Alice <alice@example.com>", []string{"bot@agentmail.to"}, nil, []string{"desk@example.com"}, own, false)
	if strings.Join(to, ",") != "desk@example.com" || len(cc) != 0 {
		t.Fatalf("Reply-To honoured: %v %v", to, cc)
	}
	to, _ = ReplyRecipients("Alice <alice@example.com>", nil, nil, []string{" "}, own, false)
	if strings.Join(to, ",") != "alice@example.com" {
		t.Fatalf("empty Reply-To falls back to From: %v", to)
	}
	// Reply-all: visible recipients, no self, deduplicated case-insensitively.
	to, cc = ReplyRecipients("alice@example.com", []string{"BOT@agentmail.to", "Bob <bob@example.com>", "ALICE@example.com"},
		[]string{"carol@example.com", "bob@example.com"}, nil, own, true)
	if strings.Join(to, ",") != "alice@example.com,bob@example.com" || strings.Join(cc, ",") != "carol@example.com" {
		t.Fatalf("reply-all: to=%v cc=%v", to, cc)
	}
	// Replying to our own message leaves no external recipient.
	to, _ = ReplyRecipients("bot@agentmail.to", nil, nil, nil, own, false)
	if len(to) != 0 {
		t.Fatalf("self excluded: %v", to)
	}
}

func TestBackoff(t *testing.T) {
	if d := backoff(1, 0); d != 2e9 {
		t.Fatalf("attempt 1: %v", d)
	}
	if d := backoff(1, 12e9); d != 12e9 {
		t.Fatalf("Retry-After wins when larger: %v", d)
	}
	if d := backoff(20, 0); d != 256e9 {
		t.Fatalf("exponent capped at 2^8: %v", d)
	}
	if d := backoff(1, 3600e9); d != 300e9 {
		t.Fatalf("Retry-After clamped to 300s: %v", d)
	}
}
