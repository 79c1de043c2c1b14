package testkit

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The real CLIs the conformance checks install. Bump them together with
// the fixtures in internal/agentcli/testdata when the CLIs change their
// interface.
const (
	ClaudePackage = "@anthropic-ai/claude-code@2.1.332"
	CodexPackage  = "@openai/codex@0.171.0"
)

var realCLIs onceValue

// RealCLIs installs the real CLIs from npm once per machine and version
// (a temporary directory reused while the versions stay the same) and
// returns their bin directory. Under CI an install failure fails the test;
// elsewhere (no npm, no registry) the check is reported as not run.
func RealCLIs(t testing.TB) string {
	t.Helper()
	dir, err := realCLIs.get(installCLIs)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("install the real CLIs for the conformance check: %v", err)
		}
		t.Skipf("!!! CONFORMANCE CHECK NOT RUN: cannot install %s and %s from npm: %v", ClaudePackage, CodexPackage, err)
	}
	return dir
}

func installCLIs() (string, error) {
	dir, err := npmInstall("paperclip-cli-conformance-"+ClaudePackage+"-"+CodexPackage, ClaudePackage, CodexPackage)
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "node_modules", ".bin"), nil
}

// npmInstall installs pkgs (pinned versions) with npm once per machine
// into a directory under the system's temporary directory named after
// name, reused while it stays the same, and returns that directory.
func npmInstall(name string, pkgs ...string) (string, error) {
	npm, err := exec.LookPath("npm")
	if err != nil {
		return "", errors.New("npm is not installed")
	}
	name = strings.NewReplacer("@", "", "/", "-").Replace(name)
	dir := filepath.Join(os.TempDir(), name)
	if _, err := os.Stat(filepath.Join(dir, ".complete")); err == nil {
		return dir, nil
	}
	// Install beside the final directory and rename it into place, so a
	// concurrent or interrupted install never leaves a half-filled cache.
	tmp, err := os.MkdirTemp(os.TempDir(), name+".partial-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, append([]string{"install", "--no-audit", "--no-fund", "--no-save", "--prefix", tmp}, pkgs...)...)
	cmd.Env = append(os.Environ(), "npm_config_update_notifier=false")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("npm install: %v\n%s", err, out)
	}
	// Readable by a sandbox's unprivileged user, as an installed CLI is.
	if err := os.Chmod(tmp, 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(tmp, ".complete"), nil, 0o644); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, dir); err != nil {
		if _, serr := os.Stat(filepath.Join(dir, ".complete")); serr != nil {
			return "", fmt.Errorf("keep the npm install: %w", err)
		}
	}
	return dir, nil
}
