package testkit

import (
	"os"
	"os/exec"
	"testing"
)

// RequireBwrap skips a sandboxed-run test when bubblewrap is not installed,
// loudly, and fails it under CI, where a missing prerequisite must never
// pass as a skip.
func RequireBwrap(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("bwrap"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("bubblewrap (bwrap) is required for sandbox tests in CI")
		}
		t.Skip("SKIPPING sandbox test: bubblewrap (bwrap) is not installed (apt-get install bubblewrap)")
	}
}
