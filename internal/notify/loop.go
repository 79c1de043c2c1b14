package notify

import (
	"context"
	"sync"
	"time"
)

// Loop is one background goroutine that runs a step, then waits for a
// tick, a wake-up or its end, and runs the step again: the shape of the
// workers that poll the database and can be woken early. The zero value
// is ready; Start it once, Stop it at shutdown.
type Loop struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// Start runs step at once, then after each tick of every and, when wake is
// not nil, each time wake is signalled, until Stop. The step's context is
// not ctx: it ends at Stop only, so a worker started under a request's or
// a start-up's context outlives it.
func (l *Loop) Start(every time.Duration, wake Signal, step func(ctx context.Context)) {
	ctx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			step(ctx)
			// A nil wake blocks for ever, so only the tick and Stop
			// end the wait.
			select {
			case <-ctx.Done():
				return
			case <-wake:
			case <-t.C:
			}
		}
	}()
}

// Stop ends the step's context and waits for the goroutine to return, at
// most until ctx ends (then it returns ctx's error and the goroutine
// finishes on its own). A Loop never started stops at once.
func (l *Loop) Stop(ctx context.Context) error {
	if l.cancel == nil {
		return nil
	}
	l.cancel()
	done := make(chan struct{})
	go func() { l.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
