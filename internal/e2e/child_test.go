package e2e_test

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/testkit"
)

// child is a process a test started, with its output captured and its
// exit observed. Every wait on it stops as soon as it exits, and every
// failure about it says how it ended and what it printed.
type child struct {
	cmd            *exec.Cmd
	stdout, stderr *testkit.SyncBuffer
	exited         chan struct{} // closed once the process has exited
	err            error         // Wait's result; read only after exited is closed
}

// startChild starts cmd with its stdout and stderr captured; the process
// is killed when t ends.
func startChild(t *testing.T, cmd *exec.Cmd) *child {
	t.Helper()
	c := &child{cmd: cmd, stdout: &testkit.SyncBuffer{}, stderr: &testkit.SyncBuffer{}, exited: make(chan struct{})}
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	// A goroutine dump (see timedOut) shows every goroutine, not only
	// the one the signal interrupted.
	cmd.Env = append(cmd.Env, "GOTRACEBACK=all")
	cmd.Stdout, cmd.Stderr = c.stdout, c.stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", cmd.Path, err)
	}
	go func() { c.err = cmd.Wait(); close(c.exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		select {
		case <-c.exited:
		case <-time.After(10 * time.Second):
		}
	})
	return c
}

// waitExit waits at most within for the process to exit and returns
// whether it exited and its exit error.
func (c *child) waitExit(within time.Duration) (bool, error) {
	select {
	case <-c.exited:
		return true, c.err
	case <-time.After(within):
		return false, nil
	}
}

// hasExited reports whether the process has exited, without waiting.
func (c *child) hasExited() bool {
	select {
	case <-c.exited:
		return true
	default:
		return false
	}
}

// report says how the process is (running, or its exit status) and the
// tails of its stdout and stderr, for a failure message; a goroutine dump
// at the end of stderr (see timedOut) is kept whole.
func (c *child) report() string {
	status := "still running"
	if c.hasExited() {
		status = "exited: exit status 0"
		if c.err != nil {
			status = "exited: " + c.err.Error()
		}
	}
	logs, dump := c.stderr.String(), ""
	if i := strings.LastIndex(logs, "SIGQUIT: quit"); i >= 0 {
		logs, dump = logs[:i], "--- goroutine dump:\n"+logs[i:]
	}
	return fmt.Sprintf("process %v: %s\n--- stdout (last 100 lines):\n%s--- stderr (last 200 lines):\n%s%s",
		c.cmd.Args, status, tail(c.stdout.String(), 100), tail(logs, 200), dump)
}

// timedOut fails the test for a wait that ran out of time. A process
// still running is hung or slow: it gets SIGQUIT first, so that its
// goroutine dump (the Go runtime's answer to SIGQUIT) is in the report
// and shows what it was waiting for.
func (c *child) timedOut(t *testing.T, within time.Duration, what string) {
	t.Helper()
	if !c.hasExited() {
		_ = c.cmd.Process.Signal(syscall.SIGQUIT)
		_, _ = c.waitExit(10 * time.Second)
	}
	t.Fatalf("timed out after %s waiting for %s\n%s", within, what, c.report())
}

// waitStdout waits at most within until every pattern matches the
// process's stdout and returns each pattern's first submatch (the whole
// match when it has none). It fails at once if the process exits first.
func (c *child) waitStdout(t *testing.T, within time.Duration, what string, patterns ...*regexp.Regexp) []string {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		// Read exited before stdout: once the process has exited, its
		// stdout is complete (Wait returns after the copy has finished),
		// so a final look cannot miss a line printed just before exit.
		gone := c.hasExited()
		if got, ok := matchAll(c.stdout.String(), patterns); ok {
			return got
		}
		if gone {
			t.Fatalf("the process exited while waiting for %s\n%s", what, c.report())
		}
		if time.Now().After(deadline) {
			c.timedOut(t, within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// eventually polls cond like testkit.Eventually, but fails at once if the
// process exits, and says how it ended and what it printed on failure.
func (c *child) eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		if cond() {
			return
		}
		if c.hasExited() {
			t.Fatalf("the process exited while waiting for %s\n%s", what, c.report())
		}
		if time.Now().After(deadline) {
			c.timedOut(t, within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func matchAll(s string, patterns []*regexp.Regexp) ([]string, bool) {
	out := make([]string, len(patterns))
	for i, re := range patterns {
		m := re.FindStringSubmatch(s)
		if m == nil {
			return nil, false
		}
		out[i] = m[len(m)-1]
	}
	return out, true
}

// listeningRE matches the line `paperclipai run` prints once its HTTP
// listener is bound: the address is the real one, also when --listen
// asked for port 0.
var listeningRE = regexp.MustCompile(`paperclipai listening on (http://\S+) \(`)
