// Package queue is the durable email delivery queue as both pipelines see
// it: what a delivery row is (its normalized event, Event) and how one gets
// in (AdmitTx), the cross-replica work signal (NotifyChannel, Broadcast),
// the provider-message filters every intake applies, and the fixed texts a
// delivery may record (docs/email-pipeline.md, "Admission").
//
// It sits below the receiving supervisor (internal/inbound), the queue's
// reader (internal/inbound/receive), the send side (internal/outbound, which
// admits its own sent messages) and the email channel core (internal/email,
// which broadcasts lifecycle changes). It imports none of them.
package queue

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/paperclipai/paperclipai/internal/agentmail"
	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/domain"
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

// NotifyChannel is the PostgreSQL channel on which commits that create
// inbound work wake the receiving workers of every replica. A payload
// names the inbox that changed; an empty payload asks for a full rescan.
const NotifyChannel = "paperclip_email_work"

// WebhookPath is the URL path prefix of the AgentMail webhook receiver: the
// inbox's public id follows it. The email service registers
// base+WebhookPath+publicId with the provider and the API serves
// "POST "+WebhookPath+"{publicId}", so the two cannot drift apart.
const WebhookPath = "/api/chat-webhooks/agentmail/"

// Admission refusals.
var (
	// ErrWrongInbox rejects an event that names another inbox than the
	// endpoint it arrived for (a correctly signed webhook of another inbox).
	ErrWrongInbox = &domain.Refusal{Kind: domain.KindForbidden, Message: "Email event belongs to a different inbox"}
	// ErrInvalidEvent rejects a channel event that cannot be admitted.
	ErrInvalidEvent = &domain.Refusal{Kind: domain.KindInvalid, Message: "Invalid AgentMail event"}
	// ErrInboxNotActive rejects an admission for an inbox that is not
	// active (it has the email service's wording for the same state).
	ErrInboxNotActive = &domain.Refusal{Kind: domain.KindConflict, Message: "This email inbox is not active"}
)

// Event is a delivery's normalized_event: the normalized provider event
// plus the receiving worker's progress, persisted with the retained mail so
// a retry after a failed wake re-runs only the wake (docs/email-pipeline.md,
// "Wakes").
type Event struct {
	agentmail.Event
	IssueID     string `json:"issueId,omitempty"`
	CommentID   string `json:"commentId,omitempty"`
	WakePending *bool  `json:"wakePending,omitempty"`
	// Released: a quarantined message released by a board user, received
	// past the filters that quarantined it.
	Released bool `json:"released,omitempty"`
}

// TaskRecorded reports whether the receiving transaction has committed for
// the delivery (its task and comment are recorded).
func (ev Event) TaskRecorded() bool { return ev.IssueID != "" }

// IsWakePending reports whether the delivery's mail is retained and its
// wake still has to be recorded.
func (ev Event) IsWakePending() bool { return ev.WakePending != nil && *ev.WakePending }

// Encode stores ev as d's normalized event.
func Encode(d *store.EmailDelivery, ev Event) error {
	raw, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("encode email delivery: %w", err)
	}
	d.NormalizedEvent = raw
	return nil
}

// Decode reads a delivery's normalized event.
func Decode(d store.EmailDelivery) (Event, error) {
	var ev Event
	if err := json.Unmarshal(d.NormalizedEvent, &ev); err != nil {
		return ev, fmt.Errorf("decode email delivery: %w", err)
	}
	return ev, nil
}

// Lock reads a delivery under its row lock with its event.
func Lock(ctx context.Context, tx *sql.Tx, st *store.Store, id string) (store.EmailDelivery, Event, error) {
	d, err := st.GetDelivery(ctx, tx, id, true)
	if err != nil {
		return d, Event{}, err
	}
	ev, err := Decode(d)
	return d, ev, err
}

// Finished reports whether a delivery reached a final state.
func Finished(d store.EmailDelivery) bool {
	return d.State == domain.DeliveryProcessed || d.State == domain.DeliveryFiltered
}

// AdmitTx admits events of one inbox inside the caller's transaction and
// returns how many were new: one email_deliveries row per event, with no
// provider call and no task. The insert deduplicates by (inbox, provider
// event id) and (inbox, kind:message id), so every transport and every
// catch-up scan may admit the same message any number of times. It queues
// the cross-replica work signal (delivered on commit); the caller signals
// the local worker after commit. An event for another inbox is
// ErrWrongInbox and an inbox that is not active ErrInboxNotActive, both
// before anything is written.
func AdmitTx(ctx context.Context, tx *sql.Tx, st *store.Store, ep domain.EmailEndpoint, evs []agentmail.Event, source string) (int, error) {
	ds := make([]store.EmailDelivery, 0, len(evs))
	for _, ev := range evs {
		// Before the comparison and the jsonb insert (see CleanEvent).
		CleanEvent(&ev)
		if !strings.EqualFold(ev.InboxID, ep.Address) {
			return 0, ErrWrongInbox
		}
		if ev.EventID == "" {
			ev.EventID = ev.DedupKey()
		}
		raw, err := json.Marshal(Event{Event: ev})
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
		return 0, ErrInboxNotActive
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
	return inserted, st.DB.NotifyPayloadTx(ctx, tx, NotifyChannel, ep.ID)
}

// NotifyInboxTx queues, inside tx, the signal that tells every replica's
// worker the inbox endpointID has new deliveries once tx commits.
func NotifyInboxTx(ctx context.Context, tx *sql.Tx, d *db.DB, endpointID string) error {
	return d.NotifyPayloadTx(ctx, tx, NotifyChannel, endpointID)
}

// SocketEndedPrefix starts the payload of a notification that an inbox's
// socket ended on the replica that held it (the inbox id follows): every
// other replica looks at the socket at once, the lease being free.
const SocketEndedPrefix = "socket-ended:"

// NotifySocketEndedTx queues, inside tx, the signal that the inbox
// endpointID's socket ended on this replica.
func NotifySocketEndedTx(ctx context.Context, tx *sql.Tx, d *db.DB, endpointID string) error {
	return d.NotifyPayloadTx(ctx, tx, NotifyChannel, SocketEndedPrefix+endpointID)
}

// Broadcast makes every replica's receiving worker rescan its inboxes now:
// the email service calls it after an inbox starts or stops or its
// credential's access changes. On SQLite (one process) it does nothing;
// the local worker is signalled in-process.
func Broadcast(ctx context.Context, d *db.DB) error { return d.Notify(ctx, NotifyChannel, "") }
