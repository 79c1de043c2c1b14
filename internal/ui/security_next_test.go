package ui

import "testing"

// TestSafeNext: redirect targets and back links taken from a request stay
// on this UI's own paths.
func TestSafeNext(t *testing.T) {
	for _, ok := range []string{"/", "/c/x/tasks", "/c/x/apps/agentmail/setup/y?step=agent&agent=z", "/c/x#attachments", "/c/a:b"} {
		if got := safeNext(ok); got != ok {
			t.Errorf("safeNext(%q) = %q, want it kept", ok, got)
		}
	}
	for _, bad := range []string{"", "c/x", "//evil.example", "/\\evil.example", "\\/evil.example", "https://evil.example/",
		"javascript:alert(1)", "/\t/evil.example", "/\r\n/evil.example", "/\x00/x", "/\x7f", "/ /evil.example",
		"http:/evil.example", "/api/companies", "/static/app.js"} {
		if got := safeNext(bad); got != "/" {
			t.Errorf("safeNext(%q) = %q, want /", bad, got)
		}
	}
}
