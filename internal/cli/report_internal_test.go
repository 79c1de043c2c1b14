package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Issue 28 item 12: `email qualify --report` wrote 0644 and followed a
// symbolic link, so a link planted where a root operator writes the report
// overwrote its target. The report is now 0600 and a link is refused.
func TestQualifyReportIsPrivateAndFollowsNoLink(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(dir, "authorized_keys")
	if err := os.WriteFile(victim, []byte("original\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "report.md")
	if err := os.Symlink(victim, link); err != nil {
		t.Fatal(err)
	}
	err := writeReport(link, []byte("# report\n"))
	if err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Fatalf("writing through a symlink: %v", err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "original\n" {
		t.Fatalf("the link's target was overwritten: %q", b)
	}
	// A new report, and an existing world-readable one, end up 0600.
	for _, pre := range []bool{false, true} {
		p := filepath.Join(dir, "q.md")
		_ = os.Remove(p)
		if pre {
			if err := os.WriteFile(p, []byte("old old old old\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := writeReport(p, []byte("# report\n")); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(p)
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("report mode (existing %v): %v %v", pre, fi.Mode(), err)
		}
		if b, _ := os.ReadFile(p); string(b) != "# report\n" {
			t.Fatalf("report content: %q", b)
		}
	}
}
