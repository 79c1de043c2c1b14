package inbound

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/paperclipai/paperclipai/internal/agentmail"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/email"
	"github.com/paperclipai/paperclipai/internal/httpx"
	"github.com/paperclipai/paperclipai/internal/store"
)

// Admission sources recorded on deliveries.
const (
	SourceWebSocket = "websocket"
	SourceWebhook   = "webhook"
	SourceCatchup   = "catchup"
	// SourceOutbound admits our own sent message as thread context.
	SourceOutbound = "outbound"
)

// notifyChannel is the PostgreSQL channel on which commits that create
// inbound work wake the workers of every replica.
const notifyChannel = "paperclip_email_work"

// ErrWrongInbox rejects an event that names another inbox than the
// endpoint it arrived for (a correctly signed webhook of another inbox).
var ErrWrongInbox = &httpx.Error{Status: http.StatusForbidden, Message: "Email event belongs to a different inbox"}

// ErrInvalidEvent rejects a channel event that cannot be admitted.
var ErrInvalidEvent = &httpx.Error{Status: http.StatusBadRequest, Message: "Invalid AgentMail event"}

// deliveryEvent is a delivery's normalized_event: the normalized provider
// event plus the worker's progress, persisted with the retained mail so a
// retry after a failed wake re-runs only the wake (docs/email-pipeline.md, "Wakes").
type deliveryEvent struct {
	agentmail.Event
	IssueID     string `json:"issueId,omitempty"`
	CommentID   string `json:"commentId,omitempty"`
	WakePending *bool  `json:"wakePending,omitempty"`
	// Released: a quarantined message released by a board user, received
	// past the filters that quarantined it (quarantine.go).
	Released bool `json:"released,omitempty"`
}

// taskRecorded reports whether the receiving transaction has committed for
// the delivery (its task and comment are recorded).
func (ev deliveryEvent) taskRecorded() bool { return ev.IssueID != "" }

// wakePending reports whether the delivery's mail is retained and its wake
// still has to be recorded.
func (ev deliveryEvent) wakePending() bool { return ev.WakePending != nil && *ev.WakePending }

// setEvent stores ev as the delivery's normalized event.
func setEvent(d *store.EmailDelivery, ev deliveryEvent) error {
	raw, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("encode email delivery: %w", err)
	}
	d.NormalizedEvent = raw
	return nil
}

// decodeEvent reads a delivery's normalized event.
func decodeEvent(d store.EmailDelivery) (deliveryEvent, error) {
	var ev deliveryEvent
	if err := json.Unmarshal(d.NormalizedEvent, &ev); err != nil {
		return ev, fmt.Errorf("decode email delivery: %w", err)
	}
	return ev, nil
}

// lockDelivery reads a delivery under its row lock with its event.
func (w *Worker) lockDelivery(ctx context.Context, tx *sql.Tx, id string) (store.EmailDelivery, deliveryEvent, error) {
	d, err := w.st.GetDelivery(ctx, tx, id, true)
	if err != nil {
		return d, deliveryEvent{}, err
	}
	ev, err := decodeEvent(d)
	return d, ev, err
}

// finished reports whether a delivery reached a final state.
func finished(d store.EmailDelivery) bool {
	return d.State == domain.DeliveryProcessed || d.State == domain.DeliveryFiltered
}

// finishTx moves a delivery to a final state (processed or filtered).
func (w *Worker) finishTx(ctx context.Context, tx *sql.Tx, d *store.EmailDelivery, state domain.DeliveryState) error {
	return w.finishTouching(ctx, tx, d, state, convTouch{})
}

// convTouch is the conversation activity recorded with a delivery's
// update (store.UpdateDeliveryTouching): the conversation and its new
// state ("" keeps it). The zero value touches nothing.
type convTouch struct{ id, state string }

// update writes d and records t, in one round trip on PostgreSQL.
func (t convTouch) update(ctx context.Context, w *Worker, tx *sql.Tx, d *store.EmailDelivery) error {
	return w.st.UpdateDeliveryTouching(ctx, tx, d, t.id, t.state)
}

// finishTouching is finishTx that also records t.
func (w *Worker) finishTouching(ctx context.Context, tx *sql.Tx, d *store.EmailDelivery, state domain.DeliveryState, t convTouch) error {
	now := w.st.Now()
	d.State, d.ProcessedAt, d.NextAttemptAt, d.RedactedError = state, &now, nil, ""
	return t.update(ctx, w, tx, d)
}

// AdmitRaw normalizes a raw WebSocket frame or webhook body and admits it
// for ep. It returns admitted=false for frames that are not channel events
// and for duplicates. An event for another inbox is ErrWrongInbox; a
// malformed channel event is ErrInvalidEvent.
func (w *Worker) AdmitRaw(ctx context.Context, ep domain.EmailEndpoint, raw []byte, source string) (bool, error) {
	ev, err := agentmail.NormalizeEvent(raw)
	if err != nil {
		return false, ErrInvalidEvent
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
// inbox fails the whole call with ErrWrongInbox before anything is written.
func (w *Worker) AdmitEvents(ctx context.Context, ep domain.EmailEndpoint, evs []agentmail.Event, source string) (int, error) {
	start := time.Now()
	inserted := 0
	err := w.tx(ctx, func(tx *sql.Tx) error {
		var err error
		inserted, err = AdmitTx(ctx, tx, w.st, ep, evs, source)
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

// AdmitTx admits events of one inbox inside the caller's transaction and
// returns how many were new: one email_deliveries row per event, with no
// provider call and no task. It queues the cross-replica work signal
// (delivered on commit); the caller signals the local worker after commit
// (Options.Work). An event for another inbox is ErrWrongInbox and an inbox
// that is not active is email.ErrInboxNotActive, both before anything is
// written.
func AdmitTx(ctx context.Context, tx *sql.Tx, st *store.Store, ep domain.EmailEndpoint, evs []agentmail.Event, source string) (int, error) {
	ds := make([]store.EmailDelivery, 0, len(evs))
	for _, ev := range evs {
		// Before the comparison and the jsonb insert (see cleanEvent).
		cleanEvent(&ev)
		if !strings.EqualFold(ev.InboxID, ep.Address) {
			return 0, ErrWrongInbox
		}
		if ev.EventID == "" {
			ev.EventID = ev.DedupKey()
		}
		raw, err := json.Marshal(deliveryEvent{Event: ev})
		if err != nil {
			return 0, fmt.Errorf("admit email event: %w", err)
		}
		ds = append(ds, store.EmailDelivery{CompanyID: ep.CompanyID, EndpointID: ep.ID, ProviderEventID: ev.EventID,
			DeduplicationKey: ev.DedupKey(), EventKind: "message", Source: source, ProviderThreadID: ev.ThreadID,
			NormalizedEvent: raw})
	}
	// A cheap status read instead of the full credential check: the
	// webhook route has already run that check, the socket is closed when
	// the inbox stops, and processing re-checks everything; this only keeps
	// a stopping inbox from growing its queue. It is a plain read on
	// purpose: a shared row lock here would deadlock against a concurrent
	// admission upgrading to update last_event_at.
	cur, err := st.GetEndpoint(ctx, tx, ep.ID)
	if err != nil {
		return 0, err
	}
	if cur.Status != domain.EndpointActive {
		return 0, email.ErrInboxNotActive
	}
	inserted := 0
	for i := range ds {
		ok, err := st.InsertDelivery(ctx, tx, &ds[i])
		if err != nil {
			return 0, err
		}
		if ok {
			inserted++
		}
	}
	if inserted == 0 {
		return 0, nil
	}
	if err := st.TouchEndpointEvent(ctx, tx, ep.ID); err != nil {
		return 0, err
	}
	// The payload names the inbox, so other replicas visit only it.
	return inserted, st.DB.NotifyPayloadTx(ctx, tx, notifyChannel, ep.ID)
}

// listen relays PostgreSQL notifications on notifyChannel: one naming an
// inbox wakes that inbox, any other rescans (Notify). After a lost
// connection it rescans once (a notification may have been missed) and
// listens again.
func (w *Worker) listen(ctx context.Context) {
	defer w.wg.Done()
	backoff := 500 * time.Millisecond
	for ctx.Err() == nil {
		err := w.db.ListenPayload(ctx, notifyChannel, w.notified)
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

// notified handles one work notification from another process.
func (w *Worker) notified(payload string) {
	if payload == "" {
		w.Notify()
		return
	}
	w.wakeInbox(payload)
}

// BroadcastChange tells every replica's worker (this one's included) to
// rescan its inboxes now: the email service calls it after an inbox
// starts or stops or its credential's access changes. A failure is only
// logged; every worker rescans within a minute anyway.
func (w *Worker) BroadcastChange(ctx context.Context) {
	if err := w.db.Notify(ctx, notifyChannel, ""); err != nil {
		w.log.Warn("announce an inbox change", "err", err)
	}
}
