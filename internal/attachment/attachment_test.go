package attachment_test

import (
	"strings"
	"testing"

	"github.com/paperclipai/paperclipai/internal/attachment"
)

func TestSanitizeFilename(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"report.pdf", "report.pdf"},
		{"../context.txt", "context.txt"},
		{`..\..\windows\evil.exe`, "evil.exe"},
		{"dir/sub/name.txt", "name.txt"},
		{".hidden", "hidden"},
		{"a..b.txt", "a_b.txt"},
		{"quote\"d\x00name\n.txt", "quotedname.txt"},
		{"  spaced  ", "spaced"},
		{"", "attachment"},
		{"..", "attachment"},
		{"/", "attachment"},
		{strings.Repeat("é", 150), strings.Repeat("é", 100)},
		// Issue 28 item 10: format characters would make this read
		// "invoiceexe.pdf".
		{"invoice\u202efdp.exe", "invoicefdp.exe"},
		{"\ufeffa\u200bb\u2066c\u2069\u200e.txt", "abc.txt"},
	} {
		if got := attachment.SanitizeFilename(tc.in); got != tc.want {
			t.Errorf("SanitizeFilename(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestAllows(t *testing.T) {
	s := attachment.Store{Allowed: []string{"text/plain", " Application/PDF ", "application/octet-stream"}}
	for _, tc := range []struct {
		ct   string
		want bool
	}{
		{"text/plain", true},
		{"text/plain; charset=utf-8", true},
		{"TEXT/PLAIN", true},
		{"application/pdf", true},
		{"", true}, // missing means application/octet-stream
		{"application/x-msdownload", false},
		{"text/html", false},
	} {
		if got := s.Allows(tc.ct); got != tc.want {
			t.Errorf("Allows(%q) = %v, want %v", tc.ct, got, tc.want)
		}
	}
	if got := attachment.MediaType("Text/Plain; charset=utf-8"); got != "text/plain" {
		t.Errorf("MediaType = %q", got)
	}
}
