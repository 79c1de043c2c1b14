// Package notify is the level-triggered wake-up shared by the background
// workers: any number of Notify calls before the waiter runs collapse into
// one wake, and Notify never blocks. Loop is the goroutine such a worker
// runs: a step, then a wait for a tick or a wake-up.
package notify

// Signal wakes one waiting loop. The waiter selects on the channel
// (case <-sig:). The zero value is not usable; use New.
type Signal chan struct{}

// New returns a Signal.
func New() Signal { return make(Signal, 1) }

// Notify wakes the waiter, now or when it next waits; it never blocks.
func (s Signal) Notify() {
	select {
	case s <- struct{}{}:
	default:
	}
}
