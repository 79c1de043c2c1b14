package ui

import (
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
