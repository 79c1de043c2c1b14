package e2e_test

import (
	"bytes"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/testkit"
)

// `paperclipai emulator --state FILE` keeps its mailboxes across a
// restart of the process.
func TestStandaloneEmulatorState(t *testing.T) {
	state := filepath.Join(t.TempDir(), "emulator.json")
	addr := freePort(t)
	key := "am_state_cli_0123456789"
	startEm := func() (*exec.Cmd, chan error) {
		cmd := exec.Command(testkit.Binary(t), "emulator", "--listen", addr, "--smtp", "", "--api-key", key, "--state", state)
		var out testkit.SyncBuffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		t.Cleanup(func() { _ = cmd.Process.Kill() })
		testkit.Eventually(t, 30*time.Second, "the emulator to listen", func() bool {
			resp, err := http.Get("http://" + addr + "/healthz")
			if err == nil {
				resp.Body.Close()
			}
			return err == nil
		})
		return cmd, done
	}
	call := func(method, path, body string) int {
		req, _ := http.NewRequest(method, "http://"+addr+"/v0"+path, bytes.NewReader([]byte(body)))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	cmd, done := startEm()
	if st := call("POST", "/inboxes", `{"username":"kept"}`); st != 200 {
		t.Fatalf("create inbox: %d", st)
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	if err := <-done; err != nil && !strings.Contains(err.Error(), "signal") {
		t.Fatalf("emulator exit: %v", err)
	}
	startEm()
	if st := call("GET", "/inboxes/kept@agentmail.to", ""); st != 200 {
		t.Fatalf("the inbox after a restart: %d", st)
	}
}
