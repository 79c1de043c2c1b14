package ui

import (
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/outbound"
	"testing"
	"time"
)

// TestRetryLine spells a retrying send's progress.
func TestRetryLine(t *testing.T) {
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	next := now.Add(3200 * time.Millisecond)
	past := now.Add(-time.Second)
	for _, c := range []struct {
		attempts int
		next     *time.Time
		want     string
	}{
		{3, &next, "Retrying · attempt 3 · next in 4 s"},
		{1, &past, "Retrying · attempt 1 · next attempt now"},
		{2, nil, "Retrying · attempt 2"},
	} {
		if got := retryLine(c.attempts, c.next, now); got != c.want {
			t.Errorf("retryLine(%d, %v) = %q, want %q", c.attempts, c.next, got, c.want)
		}
	}
}

// TestFirstAttemptInFlightIsQueued: a send whose first attempt is in
// flight (the worker owns it, attempt 1, no error yet) reads Queued, not
// Retrying; once an attempt failed and left its error, it reads Retrying.
func TestFirstAttemptInFlightIsQueued(t *testing.T) {
	p := outbound.SendSummary{Outcome: domain.OutcomeQueued, Attempts: 1, Retrying: true}
	if s := (&UI{}).taskEmailSend(&taskData{}, p, nil); s.Retrying || s.Label != taskEmailOutcomeLabels[domain.OutcomeQueued] {
		t.Errorf("first attempt in flight: label %q, retrying %v", s.Label, s.Retrying)
	}
	msg := "AgentMail request failed (503); retrying with the same idempotency key"
	p.Outcome, p.Error = domain.OutcomeUncertain, &msg
	if s := (&UI{}).taskEmailSend(&taskData{}, p, nil); !s.Retrying || s.Label != taskEmailRetrying {
		t.Errorf("after a failed attempt: label %q, retrying %v", s.Label, s.Retrying)
	}
}
