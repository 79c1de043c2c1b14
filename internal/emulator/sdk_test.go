package emulator

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// sdkVersion is the official Node SDK the emulator must be indistinguishable
// from.
const sdkVersion = "agentmail@0.5.27"

// TestSDKConformance drives the emulator with the official Node SDK (see
// testdata/sdk/conformance.js), which re-parses every response and
// WebSocket frame with the SDK's own schemas in strict mode.
func TestSDKConformance(t *testing.T) {
	node, nerr := exec.LookPath("node")
	npm, perr := exec.LookPath("npm")
	if nerr != nil || perr != nil {
		msg := "!!! node/npm not found: SKIPPING the official-SDK conformance test; install Node.js to run it !!!"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	script, err := filepath.Abs(filepath.Join("testdata", "sdk", "conformance.js"))
	if err != nil {
		t.Fatalf("locate script: %v", err)
	}

	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "package.json"), []byte(`{"name":"emulator-sdk-conformance","private":true}`), 0o644); err != nil {
		t.Fatalf("write package.json: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	install := exec.CommandContext(ctx, npm, "install", "--no-audit", "--no-fund", "--loglevel=error", sdkVersion)
	install.Dir = dir
	install.Env = append(os.Environ(), "npm_config_update_notifier=false")
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("npm install %s: %v\n%s", sdkVersion, err, out)
	}

	s, key := startTest(t, Options{SMTPListen: "127.0.0.1:0"})
	runCtx, runCancel := context.WithTimeout(ctx, 90*time.Second)
	defer runCancel()
	cmd := exec.CommandContext(runCtx, node, script)
	cmd.Env = append(os.Environ(),
		"SDK_DIR="+filepath.Join(dir, "node_modules", "agentmail"),
		"EMULATOR_URL="+s.URL(),
		"API_KEY="+key,
	)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatalf("stdout pipe: %v", err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start node: %v", err)
	}
	var lines []string
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		line := sc.Text()
		lines = append(lines, line)
		if inbox, ok := strings.CutPrefix(line, "READY_FOR_SMTP "); ok {
			raw := "From: Jane Sender <jane@example.com>\r\nTo: " + inbox + "\r\nSubject: SMTP hello\r\n" +
				"Message-ID: <smtp-hello@example.com>\r\nDate: Mon, 02 Jan 2006 15:04:05 +0000\r\n" +
				"Content-Type: text/plain; charset=utf-8\r\n\r\nHello over SMTP.\r\n"
			if err := sendSMTP(s.SMTPAddr(), "jane@example.com", []string{inbox}, raw); err != nil {
				t.Errorf("smtp send: %v", err)
			}
		}
	}
	werr := cmd.Wait()
	out := strings.Join(lines, "\n")
	if werr != nil || !strings.Contains(out, "CONFORMANCE OK") {
		t.Fatalf("SDK conformance failed: %v\nstdout:\n%s\nstderr:\n%s", werr, out, stderr.String())
	}
	t.Log(lines[len(lines)-1])
}
