package outbound

import (
	"context"
	"database/sql"
	"net/http"
	"strings"

	"github.com/paperclipai/paperclipai/internal/agentmail"
	"github.com/paperclipai/paperclipai/internal/authz"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/httpx"
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
func (s *Service) HandleReceipt(ctx context.Context, tx *sql.Tx, ep domain.EmailEndpoint, ev agentmail.Event, msg *SentMessage) error {
	pub, err := s.Store.PublicationByProviderMessage(ctx, tx, ep.ID, ev.MessageID)
	if isNotFound(err) && msg != nil && msg.MessageID == ev.MessageID {
		if err := s.BindSent(ctx, tx, ep, *msg); err != nil {
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
		_, err = s.Store.SetSendOutcome(ctx, tx, pub.ID, OutcomeSent, OutcomeQueued, OutcomeUncertain)
	case agentmail.EventMessageDelivered:
		_, err = s.Store.SetSendOutcome(ctx, tx, pub.ID, OutcomeDelivered, OutcomeQueued, OutcomeSent, OutcomeUncertain)
	case agentmail.EventMessageBounced, agentmail.EventMessageComplained, agentmail.EventMessageRejected:
		if _, err = s.Store.SetSendOutcome(ctx, tx, pub.ID, OutcomeFailed); err != nil {
			return err
		}
		if err := s.Store.SetPublicationError(ctx, tx, pub.ID, "AgentMail reported "+ev.Kind); err != nil {
			return err
		}
		err = s.suppress(ctx, tx, ep, ev)
	default:
		return nil
	}
	if err != nil {
		return err
	}
	return s.audit(ctx, tx, systemActor(), ep.CompanyID, "email.receipt", pub.ID, map[string]any{"kind": ev.Kind})
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
			if err := s.Store.Suppress(ctx, tx, ep.CompanyID, ep.ID, a, ev.Kind); err != nil {
				return err
			}
		}
	}
	return nil
}

// SentMessage is what BindSent needs of a retained sent message.
type SentMessage struct {
	MessageID string
	ThreadID  string
	From      string
	Labels    []string
	Headers   map[string]string
}

// BindSent reconciles a message seen in thread context with the send that
// produced it (reference §6.8): the message must be from this inbox, labelled
// sent, and carry our publication header naming a send of this endpoint. A
// forged header on inbound mail is ignored. It binds the conversation to
// the thread and marks the send published and sent (never downgrading
// delivered), so a reply racing ahead of the send response finds one
// conversation.
func (s *Service) BindSent(ctx context.Context, tx *sql.Tx, ep domain.EmailEndpoint, m SentMessage) error {
	pubID := ""
	for k, v := range m.Headers {
		if strings.EqualFold(k, PublicationHeader) {
			pubID = strings.TrimSpace(v)
		}
	}
	if !store.ValidID(pubID) || !strings.EqualFold(addressOf(m.From), ep.Address) || !hasLabel(m.Labels, "sent") {
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
			return &httpx.Error{Status: http.StatusConflict, Message: "AgentMail returned a different message for this send"}
		}
		if pub.State == "published" {
			return nil
		}
	}
	if err := s.bindThread(ctx, tx, ep, pub.ConversationID, m.ThreadID); err != nil {
		return err
	}
	if err := s.Store.MarkPublished(ctx, tx, pub.ID, m.MessageID, m.ThreadID); err != nil {
		return err
	}
	_, err = s.Store.SetSendOutcome(ctx, tx, pub.ID, OutcomeSent, OutcomeQueued, OutcomeUncertain)
	return err
}

func hasLabel(labels []string, l string) bool {
	for _, x := range labels {
		if strings.EqualFold(x, l) {
			return true
		}
	}
	return false
}

// ResolveInput settles an uncertain send.
type ResolveInput struct {
	Outcome           string `json:"outcome"`
	ProviderMessageID string `json:"providerMessageId,omitempty"`
}

// Resolve lets a connection manager settle an uncertain send (reference
// §6.10): "sent" when a provider message carrying our header proves it went
// out, "failed" when the operator confirms it did not (a resend is then a new
// explicit action).
func (s *Service) Resolve(ctx context.Context, a authz.Actor, companyID, pubID string, in ResolveInput) (PublicationSummary, error) {
	var zero PublicationSummary
	if in.Outcome != OutcomeSent && in.Outcome != OutcomeFailed {
		return zero, badRequest("outcome must be sent or failed")
	}
	if len(in.ProviderMessageID) > maxMessageID {
		return zero, badRequest("providerMessageId is too long")
	}
	pub, err := s.Store.GetPublication(ctx, s.Store.DB, pubID)
	if err != nil || pub.CompanyID != companyID {
		return zero, &httpx.Error{Status: http.StatusNotFound, Message: "Email delivery not found"}
	}
	if _, err := s.Email.LoadForManager(ctx, a, pub.EndpointID); err != nil {
		return zero, err
	}
	if pub.Outcome != OutcomeUncertain {
		return zero, &httpx.Error{Status: http.StatusConflict, Message: "This send is not uncertain"}
	}
	conv, err := s.Store.GetConversation(ctx, s.Store.DB, pub.ConversationID)
	if err != nil {
		return zero, err
	}
	l, _, err := s.Store.TryLease(ctx, s.Store.DB, pub.CompanyID, pub.EndpointID, store.ThreadLeaseKey(conv.ExternalThreadID), s.Holder, s.LeaseTTL)
	if err != nil {
		return zero, err
	}
	if l == nil {
		return zero, &httpx.Error{Status: http.StatusConflict, Message: "An email operation is running; retry shortly"}
	}
	defer func() { _ = l.Release(ctx) }()
	var sent *agentmail.Message
	var ep domain.EmailEndpoint
	if in.Outcome == OutcomeSent {
		if in.ProviderMessageID == "" {
			return zero, badRequest("A provider message ID is required")
		}
		var key string
		ep, key, err = s.Email.ActiveEndpoint(ctx, s.Store.DB, pub.EndpointID)
		if err != nil {
			return zero, err
		}
		sent, err = s.Client.WithAPIKey(key).GetMessage(ctx, ep.Address, in.ProviderMessageID)
		if err != nil {
			return zero, badRequest("The message does not match this send intent")
		}
		h, _ := sent.Header(PublicationHeader)
		if !strings.EqualFold(sent.InboxID, ep.Address) || strings.TrimSpace(h) != pub.ID || !sent.HasLabel("sent") {
			return zero, badRequest("The message does not match this send intent")
		}
	}
	err = s.Store.Tx(ctx, func(tx *sql.Tx) error {
		cur, err := s.Store.GetPublication(ctx, tx, pub.ID)
		if err != nil {
			return err
		}
		if cur.Outcome != OutcomeUncertain {
			return &httpx.Error{Status: http.StatusConflict, Message: "Delivery was already resolved"}
		}
		if in.Outcome == OutcomeFailed {
			if err := s.Store.SetPublicationState(ctx, tx, pub.ID, "failed",
				"Operator confirmed that this email was not sent. A new explicit send is required.", nil); err != nil {
				return err
			}
			if _, err := s.Store.SetSendOutcome(ctx, tx, pub.ID, OutcomeFailed); err != nil {
				return err
			}
		} else {
			if err := s.Store.DB.AdvisoryXactLock(ctx, tx, "email:"+ep.ID+":"+sent.ThreadID); err != nil {
				return err
			}
			if err := s.BindSent(ctx, tx, ep, SentMessage{MessageID: sent.MessageID, ThreadID: sent.ThreadID, From: sent.From,
				Labels: sent.Labels, Headers: sent.Headers}); err != nil {
				return err
			}
		}
		return s.audit(ctx, tx, a, companyID, "email.resolved", pub.ID, map[string]any{"outcome": in.Outcome})
	})
	if err != nil {
		return zero, err
	}
	if sent != nil && s.Admit != nil {
		_ = s.Admit(ctx, ep.ID, agentmail.Event{Kind: agentmail.EventMessageSent, InboxID: ep.Address, MessageID: sent.MessageID,
			ThreadID: sent.ThreadID, EventID: "paperclip-sent:" + sent.MessageID})
	}
	out, err := s.Store.GetPublication(ctx, s.Store.DB, pub.ID)
	if err != nil {
		return zero, err
	}
	return Summary(out), nil
}
