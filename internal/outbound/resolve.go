package outbound

import (
	"context"
	"database/sql"
	"strings"

	"github.com/paperclipai/paperclipai/internal/agentmail"
	"github.com/paperclipai/paperclipai/internal/authz"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/safetext"
	"github.com/paperclipai/paperclipai/internal/store"
)

// ResolveInput settles an uncertain send.
type ResolveInput struct {
	Outcome           domain.SendOutcome `json:"outcome"`
	ProviderMessageID string             `json:"providerMessageId,omitempty"`
}

// Resolve lets a connection manager settle an uncertain send (docs/email-pipeline.md,
// "Resolving an uncertain send"): "sent" when a provider message carrying our header proves it went
// out, "failed" when the operator confirms it did not (a resend is then a new
// explicit action). On a disconnected inbox, whose keys are gone, "sent"
// records the manager's word and message id unverified.
func (s *Service) Resolve(ctx context.Context, a authz.Actor, companyID, pubID string, in ResolveInput) (SendSummary, error) {
	var zero SendSummary
	if err := s.Email.RequireEnabled(ctx); err != nil {
		return zero, err
	}
	if in.Outcome != domain.OutcomeSent && in.Outcome != domain.OutcomeFailed {
		return zero, badRequest("outcome must be sent or failed")
	}
	if len(in.ProviderMessageID) > maxMessageID {
		return zero, badRequest("providerMessageId is too long")
	}
	pub, err := s.Store.GetPublication(ctx, s.Store.DB, pubID)
	if err != nil || pub.CompanyID != companyID {
		return zero, notFound("Email delivery not found")
	}
	if _, err := s.Email.LoadForManager(ctx, a, pub.EndpointID); err != nil {
		return zero, err
	}
	if pub.Outcome != domain.OutcomeUncertain {
		return zero, conflict("This send is not uncertain")
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
		return zero, conflict("An email operation is running; retry shortly")
	}
	defer func() { _ = l.Release(ctx) }()
	var sent *agentmail.Message
	var ep domain.EmailEndpoint
	// unverified: the inbox is disconnected, its keys are gone, so the
	// manager's word (and message id) is recorded without asking the
	// provider, and the audit entry says so.
	unverified := false
	if in.Outcome == domain.OutcomeSent {
		if in.ProviderMessageID == "" {
			return zero, badRequest("A provider message ID is required")
		}
		if safetext.Token(in.ProviderMessageID) != nil {
			return zero, badRequest("providerMessageId is not a provider message ID")
		}
		cur, err := s.Store.GetEndpoint(ctx, s.Store.DB, pub.EndpointID)
		if err != nil {
			return zero, err
		}
		unverified = cur.Status == domain.EndpointArchived
	}
	if in.Outcome == domain.OutcomeSent && !unverified {
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
		if cur.Outcome != domain.OutcomeUncertain {
			return conflict("Delivery was already resolved")
		}
		if in.Outcome == domain.OutcomeFailed {
			if err := s.Store.SetPublicationState(ctx, tx, pub.ID, domain.SendFailed,
				"Operator confirmed that this email was not sent. A new explicit send is required.", nil); err != nil {
				return err
			}
			if _, err := s.setOutcome(ctx, tx, pub.ID, domain.OutcomeFailed); err != nil {
				return err
			}
		} else if unverified {
			other, err := s.Store.PublicationByProviderMessage(ctx, tx, pub.EndpointID, in.ProviderMessageID)
			if err == nil && other.ID != pub.ID {
				return conflict("That provider message belongs to another send")
			}
			if err != nil && !isNotFound(err) {
				return err
			}
			if err := s.Store.MarkPublished(ctx, tx, pub.ID, in.ProviderMessageID, ""); err != nil {
				return err
			}
			if _, err := s.setOutcome(ctx, tx, pub.ID, domain.OutcomeSent, domain.OutcomeUncertain); err != nil {
				return err
			}
		} else {
			if err := s.Store.DB.AdvisoryXactLock(ctx, tx, "email:"+ep.ID+":"+sent.ThreadID); err != nil {
				return err
			}
			if err := s.BindSent(ctx, tx, ep, sent); err != nil {
				return err
			}
			s.admitSent(ctx, tx, ep, sent.MessageID, sent.ThreadID)
		}
		return s.Store.Audit(ctx, tx, a.AuditActor(), companyID, "email.resolved", "email_publication", pub.ID, map[string]any{"outcome": in.Outcome, "verified": in.Outcome == domain.OutcomeSent && !unverified})
	})
	if err != nil {
		return zero, err
	}
	if sent != nil {
		s.InboundWork.Notify()
	}
	out, err := s.Store.GetPublication(ctx, s.Store.DB, pub.ID)
	if err != nil {
		return zero, err
	}
	return summarizeSend(out), nil
}
