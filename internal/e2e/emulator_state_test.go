package e2e_test

import (
	"bytes"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// `paperclipai emulator --state FILE` keeps its mailboxes across a
// restart of the process.
func TestStandaloneEmulatorState(t *testing.T) {
	state := filepath.Join(t.TempDir(), "emulator.json")
	key := "am_state_cli_0123456789"
	// Each start listens on port 0: the restarted emulator finds its
	// mailboxes in the state file, not at an address.
	startEm := func() (*child, string) {
		c := startEmulatorChild(t, "--listen", "127.0.0.1:0", "--smtp", "", "--api-key", key, "--state", state)
		url := c.waitStdout(t, 30*time.Second, "the emulator to listen", emulatorControlRE)[0]
		c.eventually(t, 30*time.Second, "the emulator to answer", func() bool {
			resp, err := http.Get(url + "/healthz")
			if err == nil {
				resp.Body.Close()
			}
			return err == nil
		})
		return c, url
	}
	call := func(c *child, url, method, path, body string) int {
		req, _ := http.NewRequest(method, url+"/v0"+path, bytes.NewReader([]byte(body)))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", method, path, err, c.report())
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	c, url := startEm()
	if st := call(c, url, "POST", "/inboxes", `{"username":"kept"}`); st != 200 {
		t.Fatalf("create inbox: %d", st)
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	if ok, err := c.waitExit(30 * time.Second); !ok {
		c.timedOut(t, 30*time.Second, "the emulator to stop")
	} else if err != nil && !strings.Contains(err.Error(), "signal") {
		t.Fatalf("emulator exit: %v\n%s", err, c.report())
	}
	c, url = startEm()
	if st := call(c, url, "GET", "/inboxes/kept@agentmail.to", ""); st != 200 {
		t.Fatalf("the inbox after a restart: %d", st)
	}
}
