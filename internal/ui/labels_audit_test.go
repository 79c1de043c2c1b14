package ui

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestEveryAuditedActionHasALabel: every audit action the code writes
// (an Audit… call, or an activity row's Action, with a literal name) has
// a label on the Activity page, so the page never falls back to an
// internal name such as email.receipt (issue 31).
func TestEveryAuditedActionHasALabel(t *testing.T) {
	calls := []*regexp.Regexp{
		regexp.MustCompile(`\b[Aa]udit\w*\([^"\n]*"([a-z_]+(?:\.[a-z_]+)+)"`),
		regexp.MustCompile(`Action:\s*"([a-z_]+(?:\.[a-z_]+)+)",\s*EntityType:`),
	}
	found := map[string]string{}
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, re := range calls {
			for _, m := range re.FindAllStringSubmatch(string(b), -1) {
				// A name built at run time ("email.review_"+status) is
				// listed by hand in activityLabels.
				if !strings.HasSuffix(m[1], "_") && !strings.HasSuffix(m[1], ".") {
					found[m[1]] = path
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(found) < 30 {
		t.Fatalf("found only %d audited actions; has the Audit call shape changed?", len(found))
	}
	for action, path := range found {
		if activityLabels[action] == "" {
			t.Errorf("audit action %q (%s) has no label in activityLabels", action, path)
		}
	}
}
