package e2e_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestScreenshotsComeFromTheScript keeps docs/ui/ made by
// scripts/ui-screenshots (docs/ui.md, "Screenshots"), never by hand: every
// test the script runs exists; every test file that takes screenshots has
// a test the script runs; every PNG in docs/ui/ is named in a browser
// test (whole, or its page name before "-desktop" or "-phone") and shown
// by a doc; and every docs/ui/ image a doc shows exists.
func TestScreenshotsComeFromTheScript(t *testing.T) {
	root := repoRoot()
	script, err := os.ReadFile(filepath.Join(root, "scripts", "ui-screenshots"))
	if err != nil {
		t.Fatalf("read the screenshot script: %v", err)
	}
	m := regexp.MustCompile(`-run '([^']+)'`).FindSubmatch(script)
	if m == nil {
		t.Fatal("scripts/ui-screenshots names no tests with -run '…'")
	}
	var run []string
	for _, p := range strings.Split(string(m[1]), "|") {
		run = append(run, strings.SplitN(p, "/", 2)[0])
	}

	files, err := filepath.Glob(filepath.Join(root, "internal", "e2e", "*_test.go"))
	if err != nil {
		t.Fatal(err)
	}
	var all strings.Builder
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatalf("read %s: %v", f, err)
		}
		src := string(b)
		all.WriteString(src)
		if b := filepath.Base(f); b == "uiharness_test.go" || b == "screenshots_test.go" || !strings.Contains(src, ".screenshot(") {
			continue
		}
		found := false
		for _, name := range run {
			found = found || strings.Contains(src, "func "+name+"(")
		}
		if !found {
			t.Errorf("%s takes screenshots in no test scripts/ui-screenshots runs", filepath.Base(f))
		}
	}
	for _, name := range run {
		if !strings.Contains(all.String(), "func "+name+"(t *testing.T)") {
			t.Errorf("scripts/ui-screenshots runs %s, which does not exist", name)
		}
	}

	var docs strings.Builder
	mds, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range mds {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatalf("read %s: %v", f, err)
		}
		docs.Write(b)
	}
	pngs, err := filepath.Glob(filepath.Join(root, "docs", "ui", "*.png"))
	if err != nil {
		t.Fatal(err)
	}
	if len(pngs) == 0 {
		t.Fatal("docs/ui/ holds no screenshots")
	}
	have := map[string]bool{}
	for _, p := range pngs {
		name := strings.TrimSuffix(filepath.Base(p), ".png")
		have[name] = true
		if strings.HasSuffix(name, "-dark") {
			t.Errorf("docs/ui/%s.png: the dark variants are for review, not for the docs", name)
			continue
		}
		page := strings.TrimSuffix(strings.TrimSuffix(name, "-desktop"), "-phone")
		if !strings.Contains(all.String(), `"`+name+`"`) && !strings.Contains(all.String(), `"`+page+`"`) {
			t.Errorf("docs/ui/%s.png is named in no browser test: it was not made by scripts/ui-screenshots", name)
		}
		if !strings.Contains(docs.String(), "ui/"+name+".png") {
			t.Errorf("docs/ui/%s.png is shown by no doc", name)
		}
	}
	for _, l := range regexp.MustCompile(`\(ui/([a-z0-9-]+)\.png\)`).FindAllStringSubmatch(docs.String(), -1) {
		if !have[l[1]] {
			t.Errorf("a doc shows ui/%s.png, which docs/ui/ does not hold", l[1])
		}
	}
}
