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
//
// The steps: check the input, find the uncertain send, take its thread's
// lease, prove a "sent" claim (proveSent), then settle it (settleTx).
func (s *Service) Resolve(ctx context.Context, a authz.Actor, companyID, pubID string, in ResolveInput) (SendSummary, error) {
	var zero SendSummary
	if err := s.Email.RequireEnabled(ctx); err != nil {
		return zero, err
	}
	if err := in.validate(); err != nil {
		return zero, err
	}
	pub, err := s.uncertainSend(ctx, a, companyID, pubID)
	if err != nil {
		return zero, err
	}
	l, err := s.resolveLease(ctx, pub)
	if err != nil {
		return zero, err
	}
	defer func() { _ = l.Release(ctx) }()
	pr, err := s.proveSent(ctx, pub, in)
	if err != nil {
		return zero, err
	}
	err = s.Store.Tx(ctx, func(tx *sql.Tx) error {
		if err := s.settleTx(ctx, tx, pub, in, pr); err != nil {
			return err
		}
		return s.Store.Audit(ctx, tx, a.AuditActor(), companyID, "email.resolved", "email_publication", pub.ID,
			map[string]any{"outcome": in.Outcome, "verified": in.Outcome == domain.OutcomeSent && !pr.unverified})
	})
	if err != nil {
		return zero, err
	}
	if pr.sent != nil {
		s.InboundWork.Notify()
	}
	out, err := s.Store.GetPublication(ctx, s.Store.DB, pub.ID)
	if err != nil {
		return zero, err
	}
	return summarizeSend(out), nil
}

// validate checks the shape of a resolution: an outcome of sent or failed
// and a provider message id of bounded length.
func (in ResolveInput) validate() error {
	if in.Outcome != domain.OutcomeSent && in.Outcome != domain.OutcomeFailed {
		return badRequest("outcome must be sent or failed")
	}
	if len(in.ProviderMessageID) > maxMessageID {
		return badRequest("providerMessageId is too long")
	}
	return nil
}

// uncertainSend reads the company's send pubID for a manager of its
// inbox, and refuses one that is not uncertain.
func (s *Service) uncertainSend(ctx context.Context, a authz.Actor, companyID, pubID string) (store.EmailPublication, error) {
	pub, err := s.Store.GetPublication(ctx, s.Store.DB, pubID)
	if err != nil || pub.CompanyID != companyID {
		return pub, notFound("Email delivery not found")
	}
	if _, err := s.Email.LoadForManager(ctx, a, pub.EndpointID); err != nil {
		return pub, err
	}
	if pub.Outcome != domain.OutcomeUncertain {
		return pub, conflict("This send is not uncertain")
	}
	return pub, nil
}

// resolveLease takes the send's thread lease, so no worker attempt runs
// while the send is settled; a held lease refuses the resolution.
func (s *Service) resolveLease(ctx context.Context, pub store.EmailPublication) (*store.Lease, error) {
	conv, err := s.Store.GetConversation(ctx, s.Store.DB, pub.ConversationID)
	if err != nil {
		return nil, err
	}
	l, _, err := s.Store.TryLease(ctx, s.Store.DB, pub.CompanyID, pub.EndpointID, store.ThreadLeaseKey(conv.ExternalThreadID), s.Holder, s.LeaseTTL)
	if err != nil {
		return nil, err
	}
	if l == nil {
		return nil, conflict("An email operation is running; retry shortly")
	}
	return l, nil
}

// sentProof is what backs a "sent" resolution: the provider's message and
// its inbox, or (unverified) only the manager's word on a disconnected
// inbox. A "failed" resolution needs none.
type sentProof struct {
	sent       *agentmail.Message
	ep         domain.EmailEndpoint
	unverified bool
}

// proveSent checks a "sent" claim: it needs a provider message id; on a
// disconnected inbox (its keys gone) the manager's word is recorded
// unverified, otherwise the provider's message must carry our header,
// come from the send's inbox and be labelled sent.
func (s *Service) proveSent(ctx context.Context, pub store.EmailPublication, in ResolveInput) (sentProof, error) {
	var pr sentProof
	if in.Outcome != domain.OutcomeSent {
		return pr, nil
	}
	if in.ProviderMessageID == "" {
		return pr, badRequest("A provider message ID is required")
	}
	if safetext.Token(in.ProviderMessageID) != nil {
		return pr, badRequest("providerMessageId is not a provider message ID")
	}
	cur, err := s.Store.GetEndpoint(ctx, s.Store.DB, pub.EndpointID)
	if err != nil {
		return pr, err
	}
	if pr.unverified = cur.Status == domain.EndpointArchived; pr.unverified {
		return pr, nil
	}
	ep, key, err := s.Email.ActiveEndpoint(ctx, s.Store.DB, pub.EndpointID)
	if err != nil {
		return pr, err
	}
	sent, err := s.Client.WithAPIKey(key).GetMessage(ctx, ep.Address, in.ProviderMessageID)
	if err != nil {
		return pr, badRequest("The message does not match this send intent")
	}
	h, _ := sent.Header(PublicationHeader)
	if !strings.EqualFold(sent.InboxID, ep.Address) || strings.TrimSpace(h) != pub.ID || !sent.HasLabel("sent") {
		return pr, badRequest("The message does not match this send intent")
	}
	pr.sent, pr.ep = sent, ep
	return pr, nil
}

// settleTx records the resolution in tx, unless another resolution got
// there first: failed on the operator's word; sent unverified with the
// manager's message id (which no other send may hold); or sent as proven,
// bound like a provider receipt and admitted as thread context.
func (s *Service) settleTx(ctx context.Context, tx *sql.Tx, pub store.EmailPublication, in ResolveInput, pr sentProof) error {
	cur, err := s.Store.GetPublication(ctx, tx, pub.ID)
	if err != nil {
		return err
	}
	if cur.Outcome != domain.OutcomeUncertain {
		return conflict("Delivery was already resolved")
	}
	switch {
	case in.Outcome == domain.OutcomeFailed:
		if err := s.Store.SetPublicationState(ctx, tx, pub.ID, domain.SendFailed,
			"Operator confirmed that this email was not sent. A new explicit send is required.", nil); err != nil {
			return err
		}
		_, err := s.setOutcome(ctx, tx, pub.ID, domain.OutcomeFailed)
		return err
	case pr.unverified:
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
		_, err = s.setOutcome(ctx, tx, pub.ID, domain.OutcomeSent, domain.OutcomeUncertain)
		return err
	}
	if err := s.Store.DB.AdvisoryXactLock(ctx, tx, "email:"+pr.ep.ID+":"+pr.sent.ThreadID); err != nil {
		return err
	}
	if err := s.BindSent(ctx, tx, pr.ep, pr.sent); err != nil {
		return err
	}
	s.admitSent(ctx, tx, pr.ep, pr.sent.MessageID, pr.sent.ThreadID)
	return nil
}
