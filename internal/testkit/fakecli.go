package testkit

import (
	"os"
	"path/filepath"
	"testing"
)

var fakeCLIs onceValue

// FakeCLIs builds the test double of the Claude Code and Codex CLIs
// (internal/agentcli/fakecli) once per test process and returns the
// directory holding it as "claude" and "codex". The directory is outside
// every test's Paperclip home, as an installed CLI would be.
func FakeCLIs(t testing.TB) string {
	t.Helper()
	dir, err := fakeCLIs.get(buildFakeCLIs)
	if err != nil {
		t.Fatalf("build the fake CLIs: %v", err)
	}
	return dir
}

func buildFakeCLIs() (string, error) {
	dir, err := os.MkdirTemp("", "paperclip-fakecli-")
	if err != nil {
		return "", err
	}
	// Readable by the sandbox's unprivileged user too.
	if err := os.Chmod(dir, 0o755); err != nil {
		return "", err
	}
	claude := filepath.Join(dir, "claude")
	if err := goBuild(claude, "./internal/agentcli/fakecli"); err != nil {
		return "", err
	}
	raw, err := os.ReadFile(claude)
	if err != nil {
		return "", err
	}
	// A copy, not a link: the fake picks its personality from its own file
	// name, and the sandbox resolves links.
	if err := os.WriteFile(filepath.Join(dir, "codex"), raw, 0o755); err != nil {
		return "", err
	}
	return dir, nil
}
