package outbound

import (
	"context"
	"database/sql"
	"strings"

	"github.com/paperclipai/paperclipai/internal/agentmail"
	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/inbound/queue"
	"github.com/paperclipai/paperclipai/internal/store"
)

// HandleReceipt applies a delivery receipt to the publication that produced
// the message, inside the inbound worker's transaction. Receipts touch only
// the publication: no task, no conversation, no wake, and never a downgrade
// of delivered or failed.
//
// msg, when given, is the provider message the receipt refers to. A receipt
// can overtake the send's own response (the send is still unbound); the
// message's publication header then binds it first, so the receipt is never
// lost.
func (s *Service) HandleReceipt(ctx context.Context, tx *sql.Tx, ep domain.EmailEndpoint, ev agentmail.Event, msg *agentmail.Message) error {
	pub, err := s.Store.PublicationByProviderMessage(ctx, tx, ep.ID, ev.MessageID)
	if isNotFound(err) && msg != nil && msg.MessageID == ev.MessageID {
		if err := s.BindSent(ctx, tx, ep, msg); err != nil {
			return err
		}
		pub, err = s.Store.PublicationByProviderMessage(ctx, tx, ep.ID, ev.MessageID)
	}
	if isNotFound(err) {
		return nil // not a message Paperclip sent
	}
	if err != nil {
		return err
	}
	switch ev.Kind {
	case agentmail.EventMessageSent:
		_, err = s.setOutcome(ctx, tx, pub.ID, domain.OutcomeSent, domain.OutcomeQueued, domain.OutcomeUncertain)
	case agentmail.EventMessageDelivered:
		var changed bool
		if changed, err = s.setOutcome(ctx, tx, pub.ID, domain.OutcomeDelivered, domain.OutcomeQueued, domain.OutcomeSent, domain.OutcomeUncertain); changed {
			s.observeDelivered(pub)
		}
	case agentmail.EventMessageBounced, agentmail.EventMessageComplained, agentmail.EventMessageRejected:
		if _, err = s.setOutcome(ctx, tx, pub.ID, domain.OutcomeFailed); err != nil {
			return err
		}
		if err := s.Store.SetPublicationError(ctx, tx, pub.ID, receiptError(ev.Kind)); err != nil {
			return err
		}
		err = s.suppress(ctx, tx, ep, ev)
	default:
		return nil
	}
	if err != nil {
		return err
	}
	s.Metrics.Receipts.WithLabelValues(ev.Kind).Inc()
	return s.Store.Audit(ctx, tx, systemActor.AuditActor(), ep.CompanyID, "email.receipt", "email_publication", pub.ID, map[string]any{"kind": ev.Kind})
}

// suppress records recipients that must not be mailed again: permanent
// bounces and complaints.
func (s *Service) suppress(ctx context.Context, tx *sql.Tx, ep domain.EmailEndpoint, ev agentmail.Event) error {
	var addrs []string
	switch ev.Kind {
	case agentmail.EventMessageBounced:
		if !strings.EqualFold(ev.ReceiptType, "Permanent") {
			return nil
		}
		for _, b := range ev.BounceRecipients {
			addrs = append(addrs, b.Address)
		}
		if len(addrs) == 0 {
			addrs = ev.Recipients
		}
	case agentmail.EventMessageComplained:
		addrs = ev.Recipients
	}
	for _, a := range addrs {
		if a = strings.ToLower(addressOf(a)); a != "" {
			if err := s.Store.SuppressFrom(ctx, tx, ep.CompanyID, ep.ID, a, ev.Kind, ev.MessageID); err != nil {
				return err
			}
		}
	}
	return nil
}

// BindSent reconciles a message seen in thread context with the send that
// produced it (docs/email-pipeline.md, "Receipts and binding"): the message must be from this inbox, labelled
// sent, and carry our publication header naming a send of this endpoint. A
// forged header on inbound mail is ignored. It binds the conversation to
// the thread and marks the send published and sent (never downgrading
// delivered), so a reply racing ahead of the send response finds one
// conversation.
func (s *Service) BindSent(ctx context.Context, tx *sql.Tx, ep domain.EmailEndpoint, m *agentmail.Message) error {
	h, _ := m.Header(PublicationHeader)
	pubID := strings.TrimSpace(h)
	if !store.ValidID(pubID) || !strings.EqualFold(addressOf(m.From), ep.Address) || !m.HasLabel("sent") {
		return nil
	}
	pub, err := s.Store.GetPublication(ctx, tx, pubID)
	if isNotFound(err) || (err == nil && (pub.EndpointID != ep.ID || pub.CompanyID != ep.CompanyID)) {
		return nil
	}
	if err != nil {
		return err
	}
	if pub.ProviderMessageID != "" {
		if pub.ProviderMessageID != m.MessageID {
			return conflict("AgentMail returned a different message for this send")
		}
		if pub.State == domain.SendPublished {
			return nil
		}
	}
	if err := s.bindThread(ctx, tx, ep, pub.ConversationID, m.ThreadID); err != nil {
		return err
	}
	if err := s.Store.MarkPublished(ctx, tx, pub.ID, m.MessageID, m.ThreadID); err != nil {
		return err
	}
	_, err = s.setOutcome(ctx, tx, pub.ID, domain.OutcomeSent, domain.OutcomeQueued, domain.OutcomeUncertain)
	return err
}

// bindThread sets a conversation's provider thread (replacing a pending
// placeholder); a conversation already bound to the same thread is kept.
func (s *Service) bindThread(ctx context.Context, tx *sql.Tx, ep domain.EmailEndpoint, conversationID, threadID string) error {
	conv, err := s.Store.GetConversation(ctx, tx, conversationID)
	if err != nil {
		return err
	}
	if conv.ExternalThreadID == threadID || !strings.HasPrefix(conv.ExternalThreadID, "pending:") {
		return s.Store.TouchConversation(ctx, tx, conv.ID, "waiting")
	}
	return s.Store.SetConversationThread(ctx, tx, conv.ID, threadID, "waiting")
}

// admitSent admits our sent message into the inbound queue, inside the
// transaction that records the send, so the receiving side imports it as
// thread context (a synthetic message.sent). It is best effort: under a
// savepoint, so a failure (say the inbox was paused meanwhile) never undoes
// the send's record; the catch-up scan admits the message later anyway.
// The caller signals InboundWork after commit.
func (s *Service) admitSent(ctx context.Context, tx *sql.Tx, ep domain.EmailEndpoint, messageID, threadID string) {
	ev := agentmail.Event{Kind: agentmail.EventMessageSent, InboxID: ep.Address, MessageID: messageID, ThreadID: threadID,
		EventID: "paperclip-sent:" + messageID}
	failed, err := db.Savepoint(ctx, tx, "admit_sent", func() error {
		_, err := queue.AdmitTx(ctx, tx, s.Store, ep, []agentmail.Event{ev}, queue.SourceOutbound)
		return err
	})
	if err == nil {
		err = failed
	}
	if err != nil {
		s.Log.Warn("admit sent message for thread context", "endpoint", ep.ID, "message", messageID, "err", err)
	}
}
