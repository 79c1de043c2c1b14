package inbound

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/paperclipai/paperclipai/internal/authz"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/email"
	"github.com/paperclipai/paperclipai/internal/inbound/queue"
	"github.com/paperclipai/paperclipai/internal/store"
)

// The quarantine (docs/email-pipeline.md, "Quarantine"): every received
// message that does not become work is recorded with its reason, so
// nothing is dropped without a trace, and a board owner or admin can
// release it into work exactly as admission would have made it.

// ErrAlreadyReleased: the quarantined message was released before; the
// release changed nothing.
var ErrAlreadyReleased = errors.New("quarantined message already released")

// Release turns a quarantined message into work exactly as admission would
// have: its delivery goes back into the receiving queue marked released,
// past the filters that held it, so it creates or joins its thread's one
// task and gives its one wake (key email:<deliveryId>). Releasing is
// idempotent: the first release wins (the quarantine row's update orders
// concurrent calls); a later one returns ErrAlreadyReleased and changes
// nothing. The release is audited with the actor.
func (w *Worker) Release(ctx context.Context, a authz.Actor, id string) (store.QuarantinedMessage, error) {
	var q store.QuarantinedMessage
	var first bool
	err := w.q.tx(ctx, func(tx *sql.Tx) error {
		var err error
		if q, err = w.st.GetQuarantined(ctx, tx, id); err != nil {
			return err
		}
		ep, err := w.st.GetEndpoint(ctx, tx, q.EndpointID)
		if err != nil {
			return err
		}
		if ep.Status == domain.EndpointArchived {
			return email.ErrInboxNotActive
		}
		// The conditional update is the idempotency: of two concurrent
		// releases one updates the row, the other (after the first
		// commits, on PostgreSQL by re-checking the locked row) finds it
		// released and changes nothing.
		if first, err = w.st.MarkQuarantineReleased(ctx, tx, id, actorLabel(a)); err != nil || !first {
			return err
		}
		d, ev, err := queue.Lock(ctx, tx, w.st, q.DeliveryID)
		if err != nil {
			return err
		}
		ev.Released, ev.IssueID, ev.CommentID, ev.WakePending = true, "", "", nil
		raw, err := json.Marshal(ev)
		if err != nil {
			return fmt.Errorf("encode email delivery: %w", err)
		}
		if err := w.st.RequeueDelivery(ctx, tx, d.ID, raw); err != nil {
			return err
		}
		if err := w.st.Audit(ctx, tx, a.AuditActor(), q.CompanyID, "email.quarantine_released", "email_endpoint", q.EndpointID,
			map[string]any{"quarantineId": q.ID, "providerMessageId": q.ProviderMessageID, "reason": q.Reason}); err != nil {
			return err
		}
		// Other replicas wake only if this commits (as on admission).
		return queue.NotifyInboxTx(ctx, tx, w.db, q.EndpointID)
	})
	if err != nil {
		return q, err
	}
	if !first {
		return q, ErrAlreadyReleased
	}
	w.wakeFor(q.EndpointID, wakeDeliveries)
	return w.st.GetQuarantined(ctx, w.q, id)
}

// actorLabel names an actor in released_by: the user or agent id.
func actorLabel(a authz.Actor) string {
	by := a.AuditActor()
	if by.ID != "" {
		return by.Kind + ":" + by.ID
	}
	return by.Kind
}
