package cli

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/term"

	"github.com/paperclipai/paperclipai/internal/qualify"
)

// progress shows qualification steps: on a terminal a live list redrawn
// in place (a spinner and elapsed time on the running step), otherwise one
// plain line per change, which logs and CI output keep readable.
type progress struct {
	mu    sync.Mutex
	w     io.Writer
	live  bool
	steps []*qualify.Step
	notes []string
	drawn int // lines of the last live drawing
	frame int
	done  chan struct{}
	once  sync.Once
}

func newProgress(w io.Writer) *progress {
	p := &progress{w: w, done: make(chan struct{})}
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		p.live = true
		go p.tick()
	}
	return p
}

// tick redraws the running step's spinner until stop.
func (p *progress) tick() {
	t := time.NewTicker(120 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-p.done:
			return
		case <-t.C:
			p.mu.Lock()
			p.frame++
			p.redraw()
			p.mu.Unlock()
		}
	}
}

func (p *progress) stop() { p.once.Do(func() { close(p.done) }) }

// Plan implements qualify.Progress.
func (p *progress) Plan(steps []*qualify.Step) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.steps = steps
	if p.live {
		p.redraw()
		return
	}
	fmt.Fprintf(p.w, "Qualifying in %d steps.\n", len(steps))
}

// Update implements qualify.Progress.
func (p *progress) Update(s *qualify.Step) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.live {
		p.redraw()
		return
	}
	switch s.Status {
	case qualify.StatusRunning:
		fmt.Fprintf(p.w, "....  %s\n", s.Title)
	case qualify.StatusPassed:
		fmt.Fprintf(p.w, "pass  %s%s%s\n", s.Title, timing(s), suffix(s.Detail))
	case qualify.StatusFailed:
		fmt.Fprintf(p.w, "FAIL  %s%s%s\n", s.Title, timing(s), suffix(s.Detail))
	case qualify.StatusSkipped:
		fmt.Fprintf(p.w, "skip  %s%s\n", s.Title, suffix(s.Detail))
	}
}

// Note implements qualify.Progress.
func (p *progress) Note(text string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.live {
		p.notes = append(p.notes, text)
		p.redraw()
		return
	}
	fmt.Fprintf(p.w, "note  %s\n", text)
}

func suffix(detail string) string {
	if detail == "" {
		return ""
	}
	return ": " + detail
}

// timing is " (1.2s)" for a step that has started, else "".
func timing(s *qualify.Step) string {
	if e := elapsed(s); e != "" {
		return " (" + e + ")"
	}
	return ""
}

func elapsed(s *qualify.Step) string {
	if s.DurationMs != nil {
		return fmt.Sprintf("%.1fs", float64(*s.DurationMs)/1000)
	}
	if s.StartedAt != nil {
		return fmt.Sprintf("%.1fs", time.Since(*s.StartedAt).Seconds())
	}
	return ""
}

var spinner = []string{"|", "/", "-", `\`}

// redraw repaints the whole list over the previous drawing. Lines are cut
// to the terminal width so that none wraps and the cursor arithmetic holds.
func (p *progress) redraw() {
	width := 100
	if f, ok := p.w.(*os.File); ok {
		if w, _, err := term.GetSize(int(f.Fd())); err == nil && w > 20 {
			width = w - 1
		}
	}
	var b strings.Builder
	if p.drawn > 0 {
		fmt.Fprintf(&b, "\x1b[%dA", p.drawn)
	}
	lines := 0
	put := func(s string) {
		if r := []rune(s); len(r) > width {
			s = string(r[:width-1]) + "…"
		}
		b.WriteString("\x1b[2K" + s + "\n")
		lines++
	}
	for _, s := range p.steps {
		mark := map[string]string{qualify.StatusPending: "·", qualify.StatusPassed: "✓", qualify.StatusFailed: "✗",
			qualify.StatusSkipped: "-"}[s.Status]
		if s.Status == qualify.StatusRunning {
			mark = spinner[p.frame%len(spinner)]
		}
		line := "  " + mark + "  " + s.Title + timing(s)
		if s.Status == qualify.StatusFailed || s.Status == qualify.StatusSkipped {
			line += suffix(s.Detail)
		}
		put(line)
	}
	if len(p.notes) > 0 {
		put("")
		put("  " + p.notes[len(p.notes)-1])
	}
	p.drawn = lines
	_, _ = io.WriteString(p.w, b.String())
}
