package outbound

import (
	"context"
	"database/sql"
	"net/mail"
	"regexp"
	"slices"
	"strings"

	"github.com/paperclipai/paperclipai/internal/authz"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/store"
)

// Review modes of a send policy (docs/email-pipeline.md, "Review before send").
const (
	ReviewOff           = "off"
	ReviewNewRecipients = "new_recipients"
	ReviewAll           = "all"
)

// Limits of a send policy.
const (
	maxPolicyEntries   = 500
	maxReviewExpiresHr = 720
)

// SendPolicy is the API shape of an inbox's send policy.
type SendPolicy struct {
	Review             string   `json:"review"`
	AllowedRecipients  []string `json:"allowedRecipients"`
	BlockedRecipients  []string `json:"blockedRecipients"`
	ReviewExpiresHours int      `json:"reviewExpiresHours"`
}

// domainRE is a DNS name of at least two labels (letters, digits, hyphens).
var domainRE = regexp.MustCompile(`^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// Validate checks the policy and normalizes it in place: entries trimmed,
// lower-cased and deduplicated, a zero expiry replaced by the default.
func (p *SendPolicy) Validate() error {
	if !slices.Contains([]string{ReviewOff, ReviewNewRecipients, ReviewAll}, p.Review) {
		return badRequest("review must be off, new_recipients or all")
	}
	var err error
	if p.AllowedRecipients, err = normalizeEntries("allowedRecipients", p.AllowedRecipients); err != nil {
		return err
	}
	if p.BlockedRecipients, err = normalizeEntries("blockedRecipients", p.BlockedRecipients); err != nil {
		return err
	}
	if p.ReviewExpiresHours == 0 {
		p.ReviewExpiresHours = store.DefaultReviewExpiresHours
	}
	if p.ReviewExpiresHours < 1 || p.ReviewExpiresHours > maxReviewExpiresHr {
		return badRequest("reviewExpiresHours must be between 1 and %d", maxReviewExpiresHr)
	}
	return nil
}

// normalizeEntries validates a list of addresses or domains.
func normalizeEntries(field string, in []string) ([]string, error) {
	if len(in) > maxPolicyEntries {
		return nil, badRequest("%s may list at most %d entries", field, maxPolicyEntries)
	}
	out := []string{}
	for _, e := range in {
		e = strings.ToLower(strings.TrimSpace(e))
		switch {
		case e == "" || len(e) > maxAddressLen:
			return nil, badRequest("%s entries must be 1 to %d characters", field, maxAddressLen)
		case strings.Contains(e, "@"):
			a, err := mail.ParseAddress(e)
			if err != nil || a.Address != e {
				return nil, badRequest("%s contains an invalid email address: %q", field, e)
			}
		case !domainRE.MatchString(e):
			return nil, badRequest("%s entries must be email addresses or domain names: %q", field, e)
		}
		if !slices.Contains(out, e) {
			out = append(out, e)
		}
	}
	return out, nil
}

// MatchesRecipient reports whether addr is named by the list: an address
// entry matches itself, a domain entry the domain and its subdomains,
// case-insensitively.
func MatchesRecipient(list []string, addr string) bool {
	addr = strings.ToLower(strings.TrimSpace(addr))
	_, dom, _ := strings.Cut(addr, "@")
	for _, e := range list {
		if strings.Contains(e, "@") {
			if e == addr {
				return true
			}
			continue
		}
		if dom == e || strings.HasSuffix(dom, "."+e) {
			return true
		}
	}
	return false
}

func policyView(p store.SendPolicy) SendPolicy {
	return SendPolicy{Review: p.Review, AllowedRecipients: p.AllowedRecipients, BlockedRecipients: p.BlockedRecipients,
		ReviewExpiresHours: p.ReviewExpiresHours}
}

// holdReasons applies the policy to a send's recipients (lower-cased bare
// addresses): a blocked recipient refuses the send (403
// recipient_blocked), a recipient outside a non-empty allow list refuses
// it when review is off (403 recipient_not_allowed) and holds it
// otherwise; review "all" holds every send and "new_recipients" each send
// with a recipient the inbox was never cleared to mail. No reasons: the
// send goes out at once.
func (s *Service) holdReasons(ctx context.Context, ep domain.EmailEndpoint, p store.SendPolicy, recipients []string) ([]string, error) {
	for _, r := range recipients {
		if MatchesRecipient(p.BlockedRecipients, r) {
			return nil, recipientBlocked(r)
		}
	}
	var reasons []string
	if len(p.AllowedRecipients) > 0 {
		for _, r := range recipients {
			if MatchesRecipient(p.AllowedRecipients, r) {
				continue
			}
			if p.Review == ReviewOff {
				return nil, &domain.Refusal{Kind: domain.KindForbidden, Code: "recipient_not_allowed",
					Message: "This inbox's send policy does not allow the recipient " + r + "; the email was not sent"}
			}
			reasons = append(reasons, "not_allowed:"+r)
		}
	}
	switch p.Review {
	case ReviewAll:
		reasons = append(reasons, "review_all")
	case ReviewNewRecipients:
		unknown, err := s.Store.UnknownRecipients(ctx, s.Store.DB, ep.ID, recipients)
		if err != nil {
			return nil, err
		}
		for _, r := range unknown {
			reasons = append(reasons, "new_recipient:"+r)
		}
	}
	return reasons, nil
}

// PolicyInbox reads an inbox for its send policy: 404 when the actor may
// not see it (another company, or an agent's other inbox).
func (s *Service) PolicyInbox(ctx context.Context, a authz.Actor, endpointID string) (domain.EmailEndpoint, error) {
	ep, _, err := s.policyInbox(ctx, a, endpointID)
	return ep, err
}

// policyInbox is PolicyInbox with the actor's access to the inbox's
// company.
func (s *Service) policyInbox(ctx context.Context, a authz.Actor, endpointID string) (domain.EmailEndpoint, authz.Access, error) {
	missing := notFound("Email inbox not found")
	if !store.ValidID(endpointID) {
		return domain.EmailEndpoint{}, authz.Access{}, badRequest("invalid endpointId: must be a UUID")
	}
	ep, err := s.Store.GetEndpoint(ctx, s.Store.DB, endpointID)
	if isNotFound(err) {
		return ep, authz.Access{}, missing
	}
	if err != nil {
		return ep, authz.Access{}, err
	}
	acc, err := s.Authz.CompanyAccess(ctx, s.Store.DB, a, ep.CompanyID, false)
	if err != nil || (a.Kind == authz.KindAgent && ep.AssignedAgentID != a.AgentID()) {
		return ep, acc, missing
	}
	return ep, acc, nil
}

// EditablePolicyInbox is PolicyInbox for a change of the policy: only
// owners and admins of the inbox's company replace it.
func (s *Service) EditablePolicyInbox(ctx context.Context, a authz.Actor, endpointID string) (domain.EmailEndpoint, error) {
	ep, _, err := s.policyInbox(ctx, a, endpointID)
	if err != nil {
		return ep, err
	}
	if err := authz.RequireBoard(a); err != nil {
		return ep, err
	}
	acc, err := s.Authz.CompanyAccess(ctx, s.Store.DB, a, ep.CompanyID, true)
	if err != nil {
		return ep, err
	}
	if err := authz.RequireRole(acc, domain.RoleOwner, domain.RoleAdmin); err != nil {
		return ep, err
	}
	return ep, nil
}

// InboxSendPolicy returns the send policy of ep (an inbox from
// PolicyInbox): everyone with access to the inbox's company reads it.
func (s *Service) InboxSendPolicy(ctx context.Context, ep domain.EmailEndpoint) (SendPolicy, error) {
	p, err := s.Store.GetSendPolicy(ctx, s.Store.DB, ep.ID)
	if err != nil {
		return SendPolicy{}, err
	}
	return policyView(p), nil
}

// PutSendPolicy validates in and replaces the whole send policy of ep (an
// inbox from EditablePolicyInbox) as a, audited.
func (s *Service) PutSendPolicy(ctx context.Context, a authz.Actor, ep domain.EmailEndpoint, in SendPolicy) (SendPolicy, error) {
	if err := in.Validate(); err != nil {
		return SendPolicy{}, err
	}
	p := store.SendPolicy{EndpointID: ep.ID, CompanyID: ep.CompanyID, Review: in.Review, AllowedRecipients: in.AllowedRecipients,
		BlockedRecipients: in.BlockedRecipients, ReviewExpiresHours: in.ReviewExpiresHours}
	err := s.Store.Tx(ctx, func(tx *sql.Tx) error {
		if err := s.Store.PutSendPolicy(ctx, tx, &p, false); err != nil {
			return err
		}
		return s.Store.Audit(ctx, tx, a.AuditActor(), ep.CompanyID, "email.send_policy_updated", "email_endpoint", ep.ID,
			map[string]any{"review": p.Review, "allowedRecipients": len(p.AllowedRecipients), "blockedRecipients": len(p.BlockedRecipients),
				"reviewExpiresHours": p.ReviewExpiresHours})
	})
	if err != nil {
		return SendPolicy{}, err
	}
	return policyView(p), nil
}
