package receive

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/paperclipai/paperclipai/internal/agentmail"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/inbound/queue"
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
	case queue.HasLabel(m.Labels, "blocked"):
		return store.QuarantineBlocked, "AgentMail blocked the sender (its allow/block lists)"
	case queue.HasLabel(m.Labels, "spam"):
		return store.QuarantineSpam, "AgentMail classified the message as spam"
	case queue.HasLabel(m.Labels, "unauthenticated"):
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
func (rv *Receiver) senderVerdict(ctx context.Context, tx *sql.Tx, cur *txInbox, ep domain.EmailEndpoint, msg *agentmail.Message, thread []*agentmail.Message) verdict {
	sender := queue.SenderAddress(msg.From)
	if sender == "" {
		return verdict{}
	}
	rules, err := cur.senderRules(ctx, rv, tx, ep.ID)
	if err != nil {
		return verdict{err: err}
	}
	if rules == nil {
		return verdict{} // no rules: anyone may write
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

// senderRules returns the inbox's sender rules (nil when none were ever
// set), read and decoded once per receiving transaction. Why once: the
// transaction's deliveries all commit together, so reading the rules again
// for each would only move the moment they were read, as with the
// credential check (txInbox); a change committed while the transaction
// runs applies from the next one.
func (c *txInbox) senderRules(ctx context.Context, rv *Receiver, tx *sql.Tx, endpointID string) (*domain.SenderRules, error) {
	if c.rulesRead {
		return c.rules, nil
	}
	row, err := rv.st.GetSenderRules(ctx, tx, endpointID)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	var rules *domain.SenderRules
	if err == nil {
		rules = &domain.SenderRules{}
		if err := json.Unmarshal([]byte(row.Rules), rules); err != nil {
			return nil, fmt.Errorf("decode sender rules: %w", err)
		}
	}
	c.rules, c.rulesRead = rules, true
	return rules, nil
}

// isReplyToOwn reports whether msg answers a message the inbox sent.
func isReplyToOwn(msg *agentmail.Message, thread []*agentmail.Message) bool {
	if msg.InReplyTo == "" {
		return false
	}
	for _, m := range thread {
		if m.MessageID == msg.InReplyTo && queue.HasLabel(m.Labels, "sent") {
			return true
		}
	}
	return false
}

// finishProviderFiltered ends a delivery of mail the provider filtered:
// quarantined with the provider's label as reason, or, for mail that is
// only trashed (or a receipt), plainly filtered.
func (rv *Receiver) finishProviderFiltered(ctx context.Context, l *store.Lease, ep domain.EmailEndpoint, it *item, msg *agentmail.Message, received bool) error {
	reason, detail := providerReason(msg)
	if reason == "" || !received {
		return rv.finishFiltered(ctx, l, it.d.ID)
	}
	return rv.finishQuarantined(ctx, l, ep, it, msg, reason, detail)
}

// finishQuarantined ends a delivery as filtered (no task, no wake) and
// records its message in the quarantine, in one transaction.
func (rv *Receiver) finishQuarantined(ctx context.Context, l *store.Lease, ep domain.EmailEndpoint, it *item, msg *agentmail.Message, reason, detail string) error {
	err := rv.tx(ctx, func(tx *sql.Tx) error {
		if err := rv.fence(ctx, tx, l, ""); err != nil {
			return err
		}
		d, _, err := queue.Lock(ctx, tx, rv.st, it.d.ID)
		if err != nil || queue.Finished(d) {
			return err
		}
		if err := rv.quarantineTx(ctx, tx, ep, d, msg, reason, detail); err != nil {
			return err
		}
		return rv.finishTx(ctx, tx, &d, domain.DeliveryFiltered)
	})
	if err == nil {
		rv.m.Deliveries.WithLabelValues(string(domain.DeliveryFiltered)).Inc()
		rv.m.Quarantined.WithLabelValues(reason).Inc()
	}
	return err
}

// quarantineTx records msg of delivery d in the quarantine (once per
// delivery), with its text only: the HTML is reduced to text like retained
// mail, so no remote content is ever kept or shown.
func (rv *Receiver) quarantineTx(ctx context.Context, tx *sql.Tx, ep domain.EmailEndpoint, d store.EmailDelivery, msg *agentmail.Message, reason, detail string) error {
	return rv.st.InsertQuarantined(ctx, tx, &store.QuarantinedMessage{CompanyID: ep.CompanyID, EndpointID: ep.ID, DeliveryID: d.ID,
		ProviderMessageID: msg.MessageID, ProviderThreadID: msg.ThreadID, From: truncateRunes(msg.From, 500),
		Subject: truncateRunes(msg.Subject, 998), ReceivedAt: queue.ReceiptTime(msg), Reason: reason, Detail: detail,
		BodyText: bodyText(msg, false)})
}
