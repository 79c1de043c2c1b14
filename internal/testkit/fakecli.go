package testkit

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
)

var (
	fakeOnce sync.Once
	fakeDir  string
	fakeErr  error
)

// FakeCLIs builds the test double of the Claude Code and Codex CLIs
// (internal/agentcli/fakecli) once per test process and returns the
// directory holding it as "claude" and "codex". The directory is outside
// every test's Paperclip home, as an installed CLI would be.
func FakeCLIs(t testing.TB) string {
	t.Helper()
	fakeOnce.Do(func() {
		_, file, _, _ := runtime.Caller(0)
		root := filepath.Join(filepath.Dir(file), "..", "..")
		dir, err := os.MkdirTemp("", "paperclip-fakecli-")
		if err != nil {
			fakeErr = err
			return
		}
		// Readable by the sandbox's unprivileged user too.
		if err := os.Chmod(dir, 0o755); err != nil {
			fakeErr = err
			return
		}
		claude := filepath.Join(dir, "claude")
		cmd := exec.Command("go", "build", "-o", claude, "./internal/agentcli/fakecli")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			fakeErr = fmt.Errorf("go build fakecli: %v\n%s", err, out)
			return
		}
		raw, err := os.ReadFile(claude)
		if err == nil {
			// A copy, not a link: the fake picks its personality from its
			// own file name, and the sandbox resolves links.
			err = os.WriteFile(filepath.Join(dir, "codex"), raw, 0o755)
		}
		fakeDir, fakeErr = dir, err
	})
	if fakeErr != nil {
		t.Fatalf("build the fake CLIs: %v", fakeErr)
	}
	return fakeDir
}
