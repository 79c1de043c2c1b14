package inbound

import (
	"context"
	"database/sql"
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
// inbox wakes that inbox, any other rescans (Notify). After a lost
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
			w.wakeFor(payload, wakeSocket|wakeDeliveries)
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
