package emulator

import (
	"errors"
	"strings"
	"testing"

	"github.com/emersion/go-smtp"
)

func TestSMTPInbound(t *testing.T) {
	t.Parallel()
	s, key := startTest(t, Options{SMTPListen: "127.0.0.1:0"})
	in := createInbox(t, s, key, "smtp")
	raw := strings.Join([]string{
		"From: =?utf-8?q?J=C3=BCrgen?= <jurgen@example.de>",
		"To: Support <smtp@agentmail.to>",
		"Cc: other@example.com",
		"Subject: =?utf-8?q?Gr=C3=BC=C3=9Fe?=",
		"Message-ID: <abc/def+1@example.de>",
		"In-Reply-To: <nothing@example.de>",
		"Date: Tue, 03 Feb 2026 09:30:00 +0100",
		"X-Spam-Flag: NO",
		"MIME-Version: 1.0",
		`Content-Type: multipart/mixed; boundary="b1"`,
		"",
		"--b1",
		`Content-Type: multipart/alternative; boundary="b2"`,
		"",
		"--b2",
		"Content-Type: text/plain; charset=iso-8859-1",
		"Content-Transfer-Encoding: quoted-printable",
		"",
		"Sch=F6n.",
		"",
		"-- ",
		"J=FCrgen",
		"--b2",
		"Content-Type: text/html; charset=utf-8",
		"",
		"<p>Sch\u00f6n.</p><blockquote>old</blockquote>",
		"--b2--",
		"--b1",
		`Content-Type: application/octet-stream; name="data.bin"`,
		`Content-Disposition: attachment; filename="data.bin"`,
		"Content-Transfer-Encoding: base64",
		"",
		"AAECAw==",
		"--b1--",
		"",
	}, "\r\n")
	if err := sendSMTP(s.SMTPAddr(), "jurgen@example.de", []string{"SMTP@agentmail.to"}, raw); err != nil {
		t.Fatalf("send: %v", err)
	}
	m := mustCall(t, s, key, "GET", "/inboxes/"+esc(in)+"/messages/"+esc("<abc/def+1@example.de>"), nil, 200)
	checks := map[string]string{
		"from": "Jürgen <jurgen@example.de>", "subject": "Grüße", "timestamp": "2026-02-03T08:30:00.000Z",
		"extracted_text": "Schön.", "extracted_html": "<p>Schön.</p>", "in_reply_to": "<nothing@example.de>",
	}
	for k, want := range checks {
		if got := m.str(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	if !strings.Contains(m.str("text"), "Jürgen") || len(m.list("attachments")) != 1 || hasString(m.list("labels"), "spam") {
		t.Errorf("message: %s", m.raw)
	}
	if m.body["headers"].(map[string]any)["X-Spam-Flag"] != "NO" {
		t.Errorf("headers: %v", m.body["headers"])
	}
	// Relaying to a non-hosted address is refused per recipient.
	err := sendSMTP(s.SMTPAddr(), "a@example.com", []string{"nobody@example.com"}, "Subject: x\r\n\r\nx\r\n")
	var se *smtp.SMTPError
	if !errors.As(err, &se) || se.Code != 550 {
		t.Fatalf("relay: %v", err)
	}
}
