package testkit

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// AxePackage is the axe-core version the browser tests inject into every
// page they check (accessibility rules; docs/testing.md, "Browser tests").
const AxePackage = "axe-core@4.14.1"

var axeScript onceValue

// AxeCore returns the source of axe-core's axe.min.js, installed from npm
// once per machine and version like the real CLIs. Without npm or the
// registry it fails the test under CI, with what to do; elsewhere it
// returns "" and logs loudly that the accessibility check did not run.
func AxeCore(t testing.TB) string {
	t.Helper()
	src, err := axeScript.get(func() (string, error) {
		dir, err := npmInstall("paperclip-"+AxePackage, AxePackage)
		if err != nil {
			return "", err
		}
		b, err := os.ReadFile(filepath.Join(dir, "node_modules", "axe-core", "axe.min.js"))
		return string(b), err
	})
	if err != nil {
		msg := fmt.Sprintf("the browser tests need %s from the npm registry (npm install --prefix <cache> %s): %v", AxePackage, AxePackage, err)
		if os.Getenv("CI") != "" {
			t.Fatalf("!!! ACCESSIBILITY CHECK CANNOT RUN: %s", msg)
		}
		fmt.Fprintf(os.Stderr, "\n!!! ACCESSIBILITY CHECK NOT RUN: %s\n\n", msg)
		t.Logf("!!! ACCESSIBILITY CHECK NOT RUN: %s", msg)
		return ""
	}
	return src
}
