package outbound

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/store"
)

// headsPerEndpoint bounds the sends examined per endpoint per tick.
const headsPerEndpoint = 25

// Worker executes accepted sends: one loop per process that sleeps until
// the earliest retry deadline or until the Service's Work signal, with no
// queries while nothing is pending. Sends run in their own goroutines (at
// most Concurrency at once), so one slow provider call never holds up
// other conversations; a finished send wakes the loop for its
// conversation's next send.
type Worker struct {
	*Service
	// Observe, when set before Start, is told each accepted→sent latency
	// (benchmarks).
	Observe func(acceptToSent time.Duration)

	cancel context.CancelFunc
	done   chan struct{}
}

// NewWorker returns the worker of s; call Start to begin sending.
func NewWorker(s *Service) *Worker { return &Worker{Service: s} }

// Start starts the send loop and returns at once; ctx bounds only the
// start, the loop runs until Shutdown.
func (w *Worker) Start(ctx context.Context) error {
	lctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	w.cancel, w.done = cancel, make(chan struct{})
	listening := make(chan struct{})
	go func() {
		defer close(listening)
		w.listen(lctx)
	}()
	go func() {
		defer close(w.done)
		defer func() { <-listening }()
		w.run(lctx)
	}()
	return nil
}

// listen relays other replicas' send notifications (PostgreSQL) to the
// loop until ctx ends, reconnecting after a lost connection; each
// (re)connect also wakes the loop, since notifications sent meanwhile are
// lost. On SQLite it returns at once.
func (w *Worker) listen(ctx context.Context) {
	err := w.Store.DB.Follow(ctx, notifyChannel, w.Notify, func(err error) {
		w.Log.Warn("send notifications interrupted; reconnecting", "err", err)
	})
	if err != nil && !errors.Is(err, db.ErrNoListen) {
		w.Log.Error("send notifications", "err", err)
	}
}

// Shutdown stops the loop and waits, at most until ctx ends, for the
// sends executing now to finish (a cancelled provider call leaves its send
// to be retried with the same idempotency key).
func (w *Worker) Shutdown(ctx context.Context) error {
	if w.cancel == nil {
		return nil
	}
	w.cancel()
	select {
	case <-w.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("outbound: shutdown: %w", ctx.Err())
	}
}

// run executes sends until ctx ends.
func (w *Worker) run(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	sem := make(chan struct{}, max(1, w.Concurrency))
	var wg sync.WaitGroup
	defer wg.Wait()
	var mu sync.Mutex
	inflight := map[string]bool{} // conversation ids with a send executing here
	for {
		mu.Lock()
		busy := make(map[string]bool, len(inflight))
		for k := range inflight {
			busy[k] = true
		}
		mu.Unlock()
		due, next, err := w.tick(ctx, busy)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			w.Log.Error("send worker tick", "err", err)
			next = w.Store.Now().Add(time.Second)
		}
		for _, p := range due {
			select {
			case sem <- struct{}{}:
			default:
				continue // at capacity: a finishing send wakes the loop
			}
			mu.Lock()
			inflight[p.ConversationID] = true
			mu.Unlock()
			wg.Add(1)
			go func(p store.EmailPublication) {
				defer wg.Done()
				retryAt, err := w.process(ctx, p.ID)
				if err != nil && ctx.Err() == nil {
					w.Log.Error("send email", "publication", p.ID, "err", err)
				}
				mu.Lock()
				delete(inflight, p.ConversationID)
				mu.Unlock()
				<-sem
				if !retryAt.IsZero() {
					w.wakeAt(ctx, retryAt)
					return
				}
				w.Notify()
			}(p)
		}
		wait := time.Duration(math.MaxInt64)
		if !next.IsZero() {
			wait = max(time.Until(next), 10*time.Millisecond)
		}
		timer.Reset(min(wait, 24*time.Hour))
		select {
		case <-ctx.Done():
			return
		case <-w.Work:
		case <-timer.C:
		}
	}
}

// wakeAt notifies the loop at t (when a lease held elsewhere expires).
func (w *Worker) wakeAt(ctx context.Context, t time.Time) {
	go func() {
		select {
		case <-ctx.Done():
		case <-time.After(time.Until(t)):
			w.Notify()
		}
	}()
}

// tick returns the due head-of-conversation sends (skipping conversations
// with a send already executing here) and the next retry deadline (zero
// when nothing is waiting).
func (w *Worker) tick(ctx context.Context, busy map[string]bool) ([]store.EmailPublication, time.Time, error) {
	// Held sends whose review expired end here, and the next expiry
	// bounds how long the loop sleeps.
	next, err := w.expireReviews(ctx)
	if err != nil {
		return nil, time.Time{}, err
	}
	eps, err := w.Store.EndpointsWithPendingSends(ctx, w.Store.DB)
	if err != nil {
		return nil, time.Time{}, err
	}
	var due []store.EmailPublication
	now := w.Store.Now()
	for _, ep := range eps {
		switch ep.Status {
		case domain.EndpointActive:
		case domain.EndpointArchived:
			// A disconnected inbox never sends again: its sends end now,
			// truthfully (failed, or uncertain when an attempt was made).
			if err := w.settleArchived(ctx, ep.ID); err != nil {
				return nil, time.Time{}, err
			}
			continue
		default:
			continue // a paused inbox keeps its queue until resumed
		}
		sends, err := w.Store.PendingSends(ctx, w.Store.DB, ep.ID, headsPerEndpoint)
		if err != nil {
			return nil, time.Time{}, err
		}
		// Head-of-line per conversation: a later reply never overtakes an
		// earlier send of the same conversation, even while it waits.
		seen := map[string]bool{}
		for _, p := range sends {
			if seen[p.ConversationID] {
				continue
			}
			seen[p.ConversationID] = true
			if busy[p.ConversationID] {
				continue
			}
			if p.NextAttemptAt != nil && p.NextAttemptAt.After(now) {
				if next.IsZero() || p.NextAttemptAt.Before(next) {
					next = *p.NextAttemptAt
				}
				continue
			}
			due = append(due, p)
		}
	}
	return due, next, nil
}

// process runs one send under its conversation's thread lease. When
// another worker holds the lease it returns when to look again, so the loop
// waits instead of spinning.
func (w *Worker) process(ctx context.Context, pubID string) (time.Time, error) {
	pub, err := w.Store.GetPublication(ctx, w.Store.DB, pubID)
	if err != nil {
		return time.Time{}, err
	}
	conv, err := w.Store.GetConversation(ctx, w.Store.DB, pub.ConversationID)
	if err != nil {
		return time.Time{}, err
	}
	l, until, err := w.Store.TryLease(ctx, w.Store.DB, pub.CompanyID, pub.EndpointID, store.ThreadLeaseKey(conv.ExternalThreadID), w.Holder, w.LeaseTTL)
	if err != nil {
		return time.Time{}, err
	}
	if l == nil {
		// Another worker holds the thread: usually the inbound worker for a
		// moment, or a dead replica until the lease expires. Look again
		// shortly, but never later than the expiry.
		soon := w.Store.Now().Add(200 * time.Millisecond)
		if until.IsZero() || until.After(soon) {
			return soon, nil
		}
		return until.Add(10 * time.Millisecond), nil
	}
	// A failed release is retried in the background by the store.
	defer func() { _ = l.Release(ctx) }()
	return time.Time{}, w.execute(ctx, pubID, l)
}
