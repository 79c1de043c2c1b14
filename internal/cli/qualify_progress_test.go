package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/paperclipai/paperclipai/internal/qualify"
)

// The terminal view redraws the whole step list in place (cursor up, line
// erase) with a mark per status, and keeps the latest note under it; the
// plain view writes one line per change.
func TestProgressViews(t *testing.T) {
	steps := []*qualify.Step{{ID: "a", Title: "First step", Status: qualify.StatusPending}, {ID: "b", Title: "Second step", Status: qualify.StatusPending}}
	var live bytes.Buffer
	p := &progress{w: &live, live: true, done: make(chan struct{})}
	p.Plan(steps)
	steps[0].Status = qualify.StatusPassed
	p.Update(steps[0])
	steps[1].Status, steps[1].Detail = qualify.StatusFailed, "it broke"
	p.Update(steps[1])
	p.Note("Send an email now")
	out := live.String()
	for _, want := range []string{"  ·  Second step", "\x1b[2A", "  ✓  First step\n", "  ✗  Second step: it broke", "\x1b[2K  Send an email now"} {
		if !strings.Contains(out, want) {
			t.Errorf("live view lacks %q:\n%q", want, out)
		}
	}

	var plain bytes.Buffer
	q := newProgress(&plain) // a buffer is not a terminal
	q.Plan(steps)
	q.Update(steps[1])
	q.Note("hello")
	q.stop()
	if got := plain.String(); !strings.Contains(got, "FAIL  Second step: it broke\n") || !strings.Contains(got, "note  hello\n") || strings.Contains(got, "\x1b[") {
		t.Errorf("plain view:\n%q", got)
	}
}
