package emulator

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestParseMIMEFixtures(t *testing.T) {
	t.Parallel()
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join("testdata", "mime", name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	in, err := parseMIME(read("reply-alternative.eml"))
	if err != nil {
		t.Fatal(err)
	}
	if in.from != `"Bob, Jr." <bob@example.com>` || len(in.to) != 2 || in.to[1] != "Other Person <other@example.com>" {
		t.Errorf("addresses: from=%q to=%q", in.from, in.to)
	}
	if in.inReplyTo != "<root@example.com>" || strings.Join(in.references, " ") != "<root@example.com> <mid@example.com>" {
		t.Errorf("threading headers: %q %q", in.inReplyTo, in.references)
	}
	if got := extractReplyText(in.text); got != "Sounds good." {
		t.Errorf("extracted text %q", got)
	}
	if got := extractReplyHTML(in.html); got != "<div>Sounds good.</div>" {
		t.Errorf("extracted html %q", got)
	}

	in, err = parseMIME(read("attachments.eml"))
	if err != nil {
		t.Fatal(err)
	}
	if in.subject != "Café" || strings.TrimSpace(in.text) != "Café menu attached." {
		t.Errorf("charset decoding: %q %q", in.subject, in.text)
	}
	if len(in.attachments) != 2 {
		t.Fatalf("attachments: %d", len(in.attachments))
	}
	logo, menu := in.attachments[0], in.attachments[1]
	if logo.disposition != "inline" || logo.contentID != "logo@example.com" || logo.contentType != "image/png" || len(logo.data) != 8 {
		t.Errorf("inline image: %+v", logo)
	}
	if menu.disposition != "attachment" || menu.filename != "menü.pdf" || string(menu.data) != "%PDF-1.4\n" {
		t.Errorf("attachment: %+v", menu)
	}

	in, err = parseMIME(read("html-only-spam.eml"))
	if err != nil {
		t.Fatal(err)
	}
	if in.text != "" || !strings.Contains(in.html, "click") || in.headers["X-Spam-Flag"] != "YES" {
		t.Errorf("html only: text=%q html=%q", in.text, in.html)
	}

	// Malformed input is tolerated and still yields what can be read.
	in, err = parseMIME(read("malformed.eml"))
	if err != nil {
		t.Fatal(err)
	}
	if in.messageID != "<no-brackets@example.com>" || !in.date.IsZero() || !strings.Contains(in.text, "body") {
		t.Errorf("malformed: id=%q date=%v text=%q", in.messageID, in.date, in.text)
	}
}

func TestExtractReplyText(t *testing.T) {
	t.Parallel()
	cases := []struct{ name, in, want string }{
		{"no quote", "Hello there.\nSecond line.", "Hello there.\nSecond line."},
		{"one-line attribution", "Yes.\n\nOn Mon, 5 Jan 2026 at 10:00, Ann <a@x.com> wrote:\n> q", "Yes."},
		{"gmail two-line attribution", "Yes.\n\nOn Mon, Jan 5, 2026 at 10:00 AM Somebody With A Long Name <\nsomebody@example.com> wrote:\n> q", "Yes."},
		{"quoted block", "Answer first.\n> quoted\n> more", "Answer first."},
		{"outlook original", "See below.\n\n-----Original Message-----\nFrom: x\nSent: y", "See below."},
		{"outlook header block", "Ok.\n\nFrom: Ann <a@x.com>\nSent: Monday\nTo: b\nSubject: s\n\nold", "Ok."},
		{"signature", "Thanks!\n-- \nJane Doe\nACME", "Thanks!"},
		{"mobile footer", "Sure\n\nSent from my iPhone", "Sure"},
		{"crlf", "Hi\r\n\r\nOn Tue, Bob wrote:\r\n> x\r\n", "Hi"},
		{"forwarded", "FYI\n\n---------- Forwarded message ---------\nFrom: a", "FYI"},
		{"from line alone is content", "From: my desk, greetings.\nBye", "From: my desk, greetings.\nBye"},
	}
	for _, tc := range cases {
		if got := extractReplyText(tc.in); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
}

// FuzzParseMIME feeds arbitrary bytes through MIME ingestion and reply
// extraction; it must never panic. Seeds: testdata/mime/*.eml plus the
// corpus in testdata/fuzz/FuzzParseMIME.
func FuzzParseMIME(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("testdata", "mime", "*.eml"))
	if err != nil {
		f.Fatal(err)
	}
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		in, err := parseMIME(raw)
		if err != nil {
			return
		}
		_ = extractReplyText(in.text)
		_ = extractReplyHTML(in.html)
		_ = makePreview(in.text)
		if in.messageID != "" && (!strings.HasPrefix(in.messageID, "<") || !strings.HasSuffix(in.messageID, ">")) {
			t.Fatalf("message id not normalized: %q", in.messageID)
		}
		if utf8.ValidString(in.text) && !utf8.ValidString(makePreview(in.text)) {
			t.Fatal("preview broke UTF-8")
		}
	})
}
