package email

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/paperclipai/paperclipai/internal/authz"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/store"
)

// SuppressionItem is one suppressed recipient of a company's inbox.
type SuppressionItem struct {
	EndpointID      string    `json:"endpointId"`
	InboxAddress    string    `json:"inboxAddress"`
	Address         string    `json:"address"`
	Reason          string    `json:"reason"`
	SourceMessageID *string   `json:"sourceMessageId"`
	Since           time.Time `json:"since"`
}

// SuppressionPage is the body of GET …/email/suppressions: one page of a
// company's suppressions and the cursor of the next (null on the last
// page), the shape of every object listing (docs/api.md, "Paging").
type SuppressionPage struct {
	Items      []SuppressionItem `json:"items"`
	NextCursor *string           `json:"nextCursor"`
}

// suppressionReasons are the plain words of a suppression's reason.
var suppressionReasons = map[string]string{
	"message.bounced":    "bounced permanently",
	"message.complained": "complained (marked as spam)",
}

// SuppressionReason is the plain-words reason of a stored suppression.
func SuppressionReason(kind string) string {
	if r, ok := suppressionReasons[kind]; ok {
		return r
	}
	return kind
}

// ListSuppressions returns one page of a company's suppressed recipients
// for a board actor with company access, and the cursor of the next page.
// A cursor of another listing is store.ErrBadCursor.
func (s *Service) ListSuppressions(ctx context.Context, a authz.Actor, companyID string, p store.Page) ([]SuppressionItem, *store.Cursor, error) {
	if err := authz.RequireBoard(a); err != nil {
		return nil, nil, err
	}
	if _, err := s.Authz.CompanyAccess(ctx, s.Store.DB, a, companyID, false); err != nil {
		return nil, nil, err
	}
	rows, err := s.Store.ListSuppressions(ctx, s.Store.DB, companyID, p)
	if err != nil {
		return nil, nil, err
	}
	rows, next := store.TrimPage(rows, p, store.SuppressionCursor)
	items := make([]SuppressionItem, 0, len(rows))
	for _, v := range rows {
		items = append(items, SuppressionItem{EndpointID: v.EndpointID, InboxAddress: v.EndpointAddress, Address: v.Address,
			Reason: SuppressionReason(v.Reason), SourceMessageID: optString(v.SourceMessageID), Since: v.CreatedAt})
	}
	return items, next, nil
}

// Lifted is the answer to a lifted suppression: the address and how many
// inboxes' suppressions of it were lifted.
type Lifted struct {
	Address string `json:"address"`
	Lifted  int    `json:"lifted"`
}

// LiftSuppression lets owners and admins lift a suppression of address
// (of every inbox of the company, or of endpointID's when set), audited
// per inbox (DELETE …/suppressions/{address}[?endpointId=]).
func (s *Service) LiftSuppression(ctx context.Context, a authz.Actor, companyID, address, endpointID string) (Lifted, error) {
	if err := s.RequireRulesWriter(ctx, a, companyID); err != nil {
		return Lifted{}, err
	}
	addr := strings.ToLower(strings.TrimSpace(address))
	if addr == "" || len(addr) > 320 || !strings.Contains(addr, "@") {
		return Lifted{}, domain.Refuse(domain.KindInvalid, "address must be an email address")
	}
	if endpointID != "" && !store.ValidID(endpointID) {
		return Lifted{}, domain.Refuse(domain.KindInvalid, "invalid endpointId: must be a UUID")
	}
	var lifted []store.Suppression
	err := s.Store.Tx(ctx, func(tx *sql.Tx) error {
		var err error
		if lifted, err = s.Store.LiftSuppression(ctx, tx, companyID, endpointID, addr); err != nil {
			return err
		}
		for _, v := range lifted {
			if err := s.Store.Audit(ctx, tx, a.AuditActor(), companyID, "email.suppression_lifted", "email_endpoint", v.EndpointID,
				map[string]any{"address": v.Address, "reason": v.Reason}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return Lifted{}, err
	}
	if len(lifted) == 0 {
		return Lifted{}, domain.Refuse(domain.KindNotFound, "This address is not suppressed")
	}
	return Lifted{Address: addr, Lifted: len(lifted)}, nil
}

// BounceSendError is the stored error of a send that bounced (the send
// side's receipt error for message.bounced).
const BounceSendError = "AgentMail reported message.bounced"

// Bounce-rate alert (docs/email-setup.md, "5. Who may write to your agent"):
// over an inbox's last BounceWindow attempted sends, more than
// BounceRateLimit bounced.
const (
	BounceWindow    = 100
	BounceRateLimit = 0.05
)

// CodeBounceRateHigh is the health code of an inbox whose bounce rate is
// over BounceRateLimit.
const CodeBounceRateHigh = "bounce_rate_high"

// bounceHealth turns an otherwise healthy inbox's health into a warning
// when more than BounceRateLimit of its last BounceWindow sends bounced.
func (s *Service) bounceHealth(ctx context.Context, ep domain.EmailEndpoint, sum *domain.EmailEndpointSummary) {
	if sum.Health != domain.HealthOK {
		return
	}
	sends, bounced, err := s.Store.BounceStats(ctx, s.Store.DB, ep.ID, BounceSendError, BounceWindow)
	if err != nil || !bounceHigh(sends, bounced) {
		return
	}
	sum.Health, sum.HealthCode = domain.HealthAttention, CodeBounceRateHigh
	sum.HealthMessage = fmt.Sprintf("%d of the last %d emails sent bounced (over %d %%): check the recipients and the suppression list",
		bounced, sends, int(BounceRateLimit*100))
}

func bounceHigh(sends, bounced int) bool {
	return sends > 0 && float64(bounced)/float64(sends) > BounceRateLimit
}
