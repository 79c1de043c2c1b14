package notify_test

import (
	"context"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/notify"
)

func TestSignalCollapsesAndNeverBlocks(t *testing.T) {
	s := notify.New()
	for range 3 {
		s.Notify()
	}
	<-s
	select {
	case <-s:
		t.Fatal("three notifications before the wait must wake once")
	default:
	}
}

// TestLoopRunsAtOnceOnWakeAndStops: the step runs when the loop starts and
// again at a wake-up (the tick is an hour away), its context ends at Stop,
// and Stop returns once the goroutine has.
func TestLoopRunsAtOnceOnWakeAndStops(t *testing.T) {
	var l notify.Loop
	if err := l.Stop(context.Background()); err != nil {
		t.Fatalf("Stop of a loop never started: %v", err)
	}
	wake := notify.New()
	steps := make(chan context.Context, 4)
	l.Start(time.Hour, wake, func(ctx context.Context) { steps <- ctx })
	first := <-steps
	wake.Notify()
	<-steps
	if err := l.Stop(context.Background()); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if first.Err() == nil {
		t.Fatal("the step's context did not end at Stop")
	}
	select {
	case <-steps:
		t.Fatal("a step ran after Stop returned")
	default:
	}
}
