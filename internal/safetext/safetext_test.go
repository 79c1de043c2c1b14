package safetext_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/paperclipai/paperclipai/internal/safetext"
)

func TestTextLineToken(t *testing.T) {
	cases := []struct {
		s                 string
		text, line, token bool // true = accepted
	}{
		{"plain words", true, true, false},
		{"tab\there", true, true, false},
		{"two\nlines\r\n", true, false, false},
		{"am_key123", true, true, true},
		{"nul\x00", false, false, false},
		{"bell\a", false, false, false},
		{"esc\x1b[31m", false, false, false},
		{"del\x7f", false, false, false},
		{"c1\u0085", false, false, false},
		{"ünïcödé✓", true, true, true},
		{"ünïcödé ✓", true, true, false},
	}
	for _, c := range cases {
		if got := safetext.Text(c.s) == nil; got != c.text {
			t.Errorf("Text(%q) accepted=%v", c.s, got)
		}
		if got := safetext.Line(c.s) == nil; got != c.line {
			t.Errorf("Line(%q) accepted=%v", c.s, got)
		}
		if got := safetext.Token(c.s) == nil; got != c.token {
			t.Errorf("Token(%q) accepted=%v", c.s, got)
		}
	}
	var e *safetext.Error
	if err := safetext.Line("a\r\nb"); !errors.As(err, &e) || !strings.Contains(err.Error(), "line break") {
		t.Fatalf("CRLF: %v", err)
	}
	if err := safetext.Text("a\x00"); err == nil || !strings.Contains(err.Error(), "NUL") {
		t.Fatalf("NUL: %v", err)
	}
}

func TestJSON(t *testing.T) {
	ok := []string{
		`{"a":"plain","b":["x\ty","l1\nl2\r\n"],"c":{"d":1,"e":null,"f":true}}`,
		`{"escaped backslash":"\\u0000 is text here","quote":"\"\\"}`,
		`{"emoji":"\ud83d\ude00","u":"\u00e9"}`,
		`[1,2,3]`,
	}
	for _, s := range ok {
		if err := safetext.JSON([]byte(s)); err != nil {
			t.Errorf("%s: %v", s, err)
		}
	}
	bad := map[string]string{
		`{"title":"a\u0000b"}`:               `field "title" contains a NUL`,
		`{"x":{"items":["ok","\u001b[2J"]}}`: `field "x.items[1]" contains a control character (U+001B)`,
		`{"text":"form\ffeed"}`:              `field "text" contains a control character (U+000C)`,
		`{"name":"back\bspace"}`:             `field "name" contains a control character (U+0008)`,
		"{\"raw\":\"del\x7f\"}":              `field "raw" contains a control character (U+007F)`,
		"{\"c1\":\"next\u0085line\"}":        `field "c1" contains a control character (U+0085)`,
		`{"k\u0000":"v"}`:                    `contains a NUL`,
		`"\u0007"`:                           `contains a control character (U+0007)`,
	}
	for s, want := range bad {
		err := safetext.JSON([]byte(s))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want %q", s, err, want)
		}
	}
}

func TestCleanTextAndLine(t *testing.T) {
	cases := []struct{ in, text, line string }{
		{"plain £ ✓", "plain £ ✓", "plain £ ✓"},
		{"a\x00b", "ab", "ab"},
		{"tab\tkept\r\nnext\n", "tab\tkept\r\nnext\n", "tab\tkept  next "},
		{"bell\a esc\x1b del\x7f c1\u0085", "bell\uFFFD esc\uFFFD del\uFFFD c1\uFFFD", "bell\uFFFD esc\uFFFD del\uFFFD c1\uFFFD"},
		{"bad\xffutf8", "bad\uFFFDutf8", "bad\uFFFDutf8"},
	}
	for _, c := range cases {
		text, line := safetext.CleanText(c.in), safetext.CleanLine(c.in)
		if text != c.text || line != c.line {
			t.Errorf("Clean(%q) = %q, %q; want %q, %q", c.in, text, line, c.text, c.line)
		}
		if safetext.Text(text) != nil || safetext.Line(line) != nil {
			t.Errorf("cleaned %q still refused", c.in)
		}
		if safetext.CleanText(text) != text || safetext.CleanLine(line) != line {
			t.Errorf("cleaning %q twice changes it", c.in)
		}
	}
}

// Issue 28 item 10: Unicode format characters are removed from names, or
// shown as visible escapes, never applied.
func TestFormatCharacters(t *testing.T) {
	for _, r := range []rune{0x200e, 0x200f, 0x202a, 0x202e, 0x2066, 0x2069, 0xfeff, 0x200b, 0x00ad} {
		if !safetext.IsFormat(r) {
			t.Errorf("U+%04X is not a format character", r)
		}
	}
	if safetext.IsFormat('a') || safetext.IsFormat('é') || safetext.IsFormat('\n') {
		t.Error("ordinary characters counted as format characters")
	}
	if got := safetext.StripFormat("invoice\u202efdp.exe"); got != "invoicefdp.exe" {
		t.Errorf("StripFormat: %q", got)
	}
	if got := safetext.ShowFormat("Bank\u202e \u2066Support\u2069"); got != "Bank<U+202E> <U+2066>Support<U+2069>" {
		t.Errorf("ShowFormat: %q", got)
	}
	if s := "plain é text"; safetext.ShowFormat(s) != s || safetext.StripFormat(s) != s {
		t.Error("text without format characters changed")
	}
}
