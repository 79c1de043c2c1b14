package inbound

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/paperclipai/paperclipai/internal/agentmail"
	"github.com/paperclipai/paperclipai/internal/authz"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/email"
	"github.com/paperclipai/paperclipai/internal/store"
)

// The quarantine (docs/email-pipeline.md, "Quarantine"): every received
// message that does not become work is recorded with its reason, so
// nothing is dropped without a trace, and a board owner or admin can
// release it into work exactly as admission would have made it.

// automaticDetail is the detail of mail quarantined as automatic.
const automaticDetail = "Automatic mail (an auto-reply, bounce, mailing list or robot message) never starts a task"

// providerReason is the quarantine reason of mail the provider labelled
// (blocked before spam before unauthenticated, as the provider's event
// names them), "" for mail that is only trashed.
func providerReason(m *agentmail.Message) (reason, detail string) {
	switch {
	case hasLabel(m.Labels, "blocked"):
		return store.QuarantineBlocked, "AgentMail blocked the sender (its allow/block lists)"
	case hasLabel(m.Labels, "spam"):
		return store.QuarantineSpam, "AgentMail classified the message as spam"
	case hasLabel(m.Labels, "unauthenticated"):
		return store.QuarantineUnauthenticated, "The message failed sender authentication (SPF/DKIM/DMARC)"
	}
	return "", ""
}

// releasedMessage is m without the provider's filter labels: a released
// message is received like any other.
func releasedMessage(m *agentmail.Message) *agentmail.Message {
	c := *m
	c.Labels = nil
	for _, l := range m.Labels {
		switch strings.ToLower(l) {
		case "spam", "blocked", "unauthenticated", "trash":
			continue
		}
		c.Labels = append(c.Labels, l)
	}
	return &c
}

// verdict is the outcome of Paperclip's own sender check.
type verdict struct {
	reason, detail string
	err            error
}

// senderVerdict applies the inbox's sender rules to a received message
// the provider let through (defence in depth, and for mail that arrived
// before a sync). A suppressed recipient's own mail is not held back: a
// bounce stops our sends to the address, never its replies. A reply to one of the inbox's own
// sends (its In-Reply-To names a sent message of the thread) is checked
// against the reply lists only, as AgentMail checks it. The caller skips
// our own mail.
func (w *Worker) senderVerdict(ctx context.Context, tx *sql.Tx, ep domain.EmailEndpoint, msg *agentmail.Message, thread []*agentmail.Message) verdict {
	sender := senderAddress(msg.From)
	if sender == "" {
		return verdict{}
	}
	row, err := w.st.GetSenderRules(ctx, tx, ep.ID)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return verdict{err: err}
	}
	if err != nil {
		return verdict{} // no rules: anyone may write
	}
	var rules domain.SenderRules
	if err := json.Unmarshal([]byte(row.Rules), &rules); err != nil {
		return verdict{err: fmt.Errorf("decode sender rules: %w", err)}
	}
	reply := isReplyToOwn(msg, thread)
	blocked, entry := rules.Check(sender, reply)
	if !blocked {
		return verdict{}
	}
	list := "receive"
	if reply {
		list = "reply"
	}
	if entry != "" {
		return verdict{reason: store.QuarantineSenderRule, detail: fmt.Sprintf("The sender matches %q on the inbox's %s block list", entry, list)}
	}
	return verdict{reason: store.QuarantineSenderRule, detail: "The sender is not on the inbox's " + list + " allow list"}
}

// isReplyToOwn reports whether msg answers a message the inbox sent.
func isReplyToOwn(msg *agentmail.Message, thread []*agentmail.Message) bool {
	if msg.InReplyTo == "" {
		return false
	}
	for _, m := range thread {
		if m.MessageID == msg.InReplyTo && hasLabel(m.Labels, "sent") {
			return true
		}
	}
	return false
}

// finishProviderFiltered ends a delivery of mail the provider filtered:
// quarantined with the provider's label as reason, or, for mail that is
// only trashed (or a receipt), plainly filtered.
func (w *Worker) finishProviderFiltered(ctx context.Context, l *store.Lease, ep domain.EmailEndpoint, it *item, msg *agentmail.Message, received bool) error {
	reason, detail := providerReason(msg)
	if reason == "" || !received {
		return w.finishFiltered(ctx, l, it.d.ID)
	}
	return w.finishQuarantined(ctx, l, ep, it, msg, reason, detail)
}

// finishQuarantined ends a delivery as filtered (no task, no wake) and
// records its message in the quarantine, in one transaction.
func (w *Worker) finishQuarantined(ctx context.Context, l *store.Lease, ep domain.EmailEndpoint, it *item, msg *agentmail.Message, reason, detail string) error {
	err := w.tx(ctx, func(tx *sql.Tx) error {
		if err := w.fence(ctx, tx, l, ""); err != nil {
			return err
		}
		d, _, err := w.lockDelivery(ctx, tx, it.d.ID)
		if err != nil || finished(d) {
			return err
		}
		if err := w.quarantineTx(ctx, tx, ep, d, msg, reason, detail); err != nil {
			return err
		}
		return w.finishTx(ctx, tx, &d, domain.DeliveryFiltered)
	})
	if err == nil {
		w.m.Deliveries.WithLabelValues(string(domain.DeliveryFiltered)).Inc()
		w.m.Quarantined.WithLabelValues(reason).Inc()
	}
	return err
}

// quarantineTx records msg of delivery d in the quarantine (once per
// delivery), with its text only: the HTML is reduced to text like retained
// mail, so no remote content is ever kept or shown.
func (w *Worker) quarantineTx(ctx context.Context, tx *sql.Tx, ep domain.EmailEndpoint, d store.EmailDelivery, msg *agentmail.Message, reason, detail string) error {
	return w.st.InsertQuarantined(ctx, tx, &store.QuarantinedMessage{CompanyID: ep.CompanyID, EndpointID: ep.ID, DeliveryID: d.ID,
		ProviderMessageID: msg.MessageID, ProviderThreadID: msg.ThreadID, From: truncateRunes(msg.From, 500),
		Subject: truncateRunes(msg.Subject, 998), ReceivedAt: receiptTime(msg), Reason: reason, Detail: detail,
		BodyText: bodyText(msg, false)})
}

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
	err := w.tx(ctx, func(tx *sql.Tx) error {
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
		d, ev, err := w.lockDelivery(ctx, tx, q.DeliveryID)
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
		return w.st.DB.NotifyPayloadTx(ctx, tx, notifyChannel, q.EndpointID)
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
