package domain_test

import (
	"testing"

	"github.com/paperclipai/paperclipai/internal/domain"
)

// An http agent URL's userinfo and query are shown masked and put back
// from the vault; a URL without them is left exactly as written.
func TestMaskAndUnmaskURL(t *testing.T) {
	secrets := map[string]string{domain.URLUserinfoPath: "u:p%40x", domain.URLQueryPath: "a=1&b=2"}
	for _, tc := range []struct{ in, masked, back string }{
		{"https://u:p%40x@h.example/p%20q?a=1&b=2#frag", "https://********@h.example/p%20q?********", "https://u:p%40x@h.example/p%20q?a=1&b=2"},
		{"http://127.0.0.1:9/hook", "http://127.0.0.1:9/hook", "http://127.0.0.1:9/hook"},
		{"https://h.example/?", "https://h.example/", "https://h.example/"},
		{"https://u@h.example/", "https://********@h.example/", "https://u:p%40x@h.example/"},
	} {
		m := domain.MaskURL(tc.in)
		if m != tc.masked {
			t.Errorf("MaskURL(%q) = %q, want %q", tc.in, m, tc.masked)
		}
		if b := domain.UnmaskURL(m, secrets); b != tc.back {
			t.Errorf("UnmaskURL(%q) = %q, want %q", m, b, tc.back)
		}
	}
	if got := domain.MaskURL("http://[::1"); got != domain.WriteOnlyValue {
		t.Errorf("an unparsable URL is shown as %q", got)
	}
	if got := string(domain.MaskAdapterConfig([]byte(`{"url":"https://k:s@h/x?t=1","headers":{"A":"b"}}`))); got != `{"headers":{"A":"********"},"url":"https://********@h/x?********"}` {
		t.Errorf("MaskAdapterConfig: %s", got)
	}
}
