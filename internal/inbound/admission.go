package inbound

import (
	"context"
	"database/sql"
	"strings"
	"time"

	"github.com/paperclipai/paperclipai/internal/agentmail"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/inbound/queue"
)

// AdmitRaw normalizes a raw WebSocket frame or webhook body and admits it
// for ep. It returns admitted=false for frames that are not channel events
// and for duplicates. An event for another inbox is queue.ErrWrongInbox; a
// malformed channel event is queue.ErrInvalidEvent.
func (w *Worker) AdmitRaw(ctx context.Context, ep domain.EmailEndpoint, raw []byte, source string) (bool, error) {
	ev, err := agentmail.NormalizeEvent(raw)
	if err != nil {
		return false, queue.ErrInvalidEvent
	}
	if ev == nil {
		return false, nil
	}
	return w.AdmitEvent(ctx, ep, *ev, source)
}

// AdmitEvent durably admits a normalized event for ep: cheap and
// idempotent, with no provider call and no task (docs/email-pipeline.md, "Admission"). The
// insert deduplicates by (inbox, provider event id) and (inbox,
// kind:message id), so every transport and every catch-up scan may admit
// the same message any number of times. After commit the worker is
// signalled, locally and, on PostgreSQL, on every replica.
func (w *Worker) AdmitEvent(ctx context.Context, ep domain.EmailEndpoint, ev agentmail.Event, source string) (bool, error) {
	n, err := w.AdmitEvents(ctx, ep, []agentmail.Event{ev}, source)
	return n == 1, err
}

// AdmitEvents admits several events of one inbox in a single transaction
// (one commit, one signal) and returns how many were new. The WebSocket
// reader uses it to drain a burst of frames at once; any event for another
// inbox fails the whole call with queue.ErrWrongInbox before anything is written.
func (w *Worker) AdmitEvents(ctx context.Context, ep domain.EmailEndpoint, evs []agentmail.Event, source string) (int, error) {
	start := time.Now()
	inserted := 0
	err := w.q.tx(ctx, func(tx *sql.Tx) error {
		var err error
		inserted, err = queue.AdmitTx(ctx, tx, w.st, ep, evs, source)
		return err
	})
	if err != nil {
		return 0, err
	}
	per := time.Since(start).Seconds() / float64(len(evs))
	for range evs {
		w.m.Admission.WithLabelValues(source).Observe(per)
	}
	if inserted > 0 {
		w.wakeFor(ep.ID, wakeDeliveries)
	}
	if dup := len(evs) - inserted; dup > 0 {
		w.m.Deliveries.WithLabelValues("duplicate").Add(float64(dup))
	}
	return inserted, nil
}

// listen relays PostgreSQL notifications on queue.NotifyChannel: one naming an
// inbox wakes that inbox (remoteWake), any other rescans (Notify). After a lost
// connection it rescans once (a notification may have been missed) and
// listens again.
func (w *Worker) listen(ctx context.Context) {
	defer w.wg.Done()
	backoff := 500 * time.Millisecond
	for ctx.Err() == nil {
		err := w.db.ListenPayload(ctx, queue.NotifyChannel, func(payload string) {
			if payload == "" {
				w.Notify()
				return
			}
			w.remoteWake(payload)
		})
		if ctx.Err() != nil {
			return
		}
		w.log.Warn("work notifications interrupted; reconnecting", "err", err)
		w.Notify()
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 10*time.Second)
	}
}

// remoteDeliveryGrace is how long a replica leaves deliveries another
// replica announced to that replica before it looks at them itself.
const remoteDeliveryGrace = 2 * time.Second

// remoteWake handles a notification naming an inbox, sent by the commit of
// another replica (or of this one: PostgreSQL delivers a listener its own
// replica's notifications too). A socket that ended elsewhere is looked at
// now: its lease is free and may be this replica's to take. New
// deliveries are looked at only after remoteDeliveryGrace, and the socket
// not at all. Why: the replica that admitted them woke its own worker
// after the commit and is already receiving them, and every other replica
// reading the same due rows, fetching the same messages from the provider
// and contending for the same thread leases (and the inbox's preferred
// owner trying the socket lease) on every admission kept a three-replica
// cluster from keeping up with one busy inbox (docs/benchmarks.md, issue
// 34). The later look still finds what a replica that died right after
// admitting left behind.
func (w *Worker) remoteWake(payload string) {
	if id, ok := strings.CutPrefix(payload, queue.SocketEndedPrefix); ok {
		w.wakeFor(id, wakeSocket|wakeDeliveries)
		return
	}
	at := time.Now().Add(remoteDeliveryGrace)
	w.mu.Lock()
	st := w.inboxes[payload]
	sooner := st != nil && (st.deliveryAt.IsZero() || st.deliveryAt.After(at))
	if sooner {
		st.deliveryAt = at
	}
	w.mu.Unlock()
	switch {
	case st == nil:
		// An inbox this replica does not know yet (set up elsewhere a
		// moment ago): the round rescans and learns it.
		w.wakeFor(payload, wakeDeliveries)
	case sooner:
		// The scheduler sleeps until the earliest deadline; this one is
		// new.
		w.wakeSig.Notify()
	}
}
