// Package logging builds the process's slog logger and the redaction layer
// that keeps secrets out of every log line.
package logging

import (
	"context"
	"io"
	"log/slog"
	"regexp"
	"strings"
	"sync"
)

// tokenPatterns match credential shapes that must never be logged even when
// nobody registered them: AgentMail keys, our board and run tokens, Svix
// secrets and bearer headers.
var tokenPatterns = regexp.MustCompile(`(?i)(am_[A-Za-z0-9_\-]{6,}|pcb_[A-Za-z0-9]{8,}|pcr_[A-Za-z0-9]{8,}|whsec_[A-Za-z0-9+/=]{8,}|bearer\s+[A-Za-z0-9._\-+/=]{8,})`)

// Redactor masks registered secret values and known credential shapes.
type Redactor struct {
	mu     sync.RWMutex
	values map[string]struct{}
}

// NewRedactor returns an empty redactor.
func NewRedactor() *Redactor { return &Redactor{values: map[string]struct{}{}} }

// Add registers a secret value to mask (values shorter than 6 bytes are
// ignored: masking them would shred ordinary text).
func (r *Redactor) Add(value string) {
	if len(value) < 6 {
		return
	}
	r.mu.Lock()
	r.values[value] = struct{}{}
	r.mu.Unlock()
}

// String returns s with every secret masked as "[REDACTED]".
func (r *Redactor) String(s string) string {
	if s == "" {
		return s
	}
	r.mu.RLock()
	for v := range r.values {
		if strings.Contains(s, v) {
			s = strings.ReplaceAll(s, v, "[REDACTED]")
		}
	}
	r.mu.RUnlock()
	return tokenPatterns.ReplaceAllString(s, "[REDACTED]")
}

// Redact masks known credential shapes in s (no registered values).
func Redact(s string) string { return tokenPatterns.ReplaceAllString(s, "[REDACTED]") }

// handler wraps another slog.Handler and redacts the message and every
// string-valued attribute (including errors, which are rendered first).
type handler struct {
	next slog.Handler
	r    *Redactor
}

func (h handler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

func (h handler) Handle(ctx context.Context, rec slog.Record) error {
	out := slog.NewRecord(rec.Time, rec.Level, h.r.String(rec.Message), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.attr(a))
		return true
	})
	return h.next.Handle(ctx, out)
}

func (h handler) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, h.r.String(v.String()))
	case slog.KindGroup:
		attrs := v.Group()
		out := make([]any, 0, len(attrs))
		for _, g := range attrs {
			out = append(out, h.attr(g))
		}
		return slog.Group(a.Key, out...)
	case slog.KindAny:
		if err, ok := v.Any().(error); ok {
			return slog.String(a.Key, h.r.String(err.Error()))
		}
		return slog.String(a.Key, h.r.String(v.String()))
	}
	return slog.Attr{Key: a.Key, Value: v}
}

func (h handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	red := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		red[i] = h.attr(a)
	}
	return handler{next: h.next.WithAttrs(red), r: h.r}
}

func (h handler) WithGroup(name string) slog.Handler {
	return handler{next: h.next.WithGroup(name), r: h.r}
}

// New returns a logger writing to w (JSON when json is true, else text) at
// level, with every record passed through r.
func New(w io.Writer, json bool, level slog.Level, r *Redactor) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler
	if json {
		h = slog.NewJSONHandler(w, opts)
	} else {
		h = slog.NewTextHandler(w, opts)
	}
	return slog.New(handler{next: h, r: r})
}
