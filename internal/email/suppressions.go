package email

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/paperclipai/paperclipai/internal/authz"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/httpx"
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

// SuppressionPage is one page of a company's suppressions.
type SuppressionPage = httpx.PageList[SuppressionItem]

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
// for a board actor with company access.
func (s *Service) ListSuppressions(r *http.Request, a authz.Actor, companyID string, p store.Page) (SuppressionPage, error) {
	if err := authz.RequireBoard(a); err != nil {
		return SuppressionPage{}, err
	}
	if _, err := s.Authz.CompanyAccess(r.Context(), s.Store.DB, a, companyID, false); err != nil {
		return SuppressionPage{}, err
	}
	rows, err := s.Store.ListSuppressions(r.Context(), s.Store.DB, companyID, p)
	if errors.Is(err, store.ErrBadCursor) {
		return SuppressionPage{}, httpx.ErrBadCursor
	}
	if err != nil {
		return SuppressionPage{}, err
	}
	rows, next := httpx.TrimPage(rows, p, store.SuppressionCursor)
	items := make([]SuppressionItem, 0, len(rows))
	for _, v := range rows {
		items = append(items, SuppressionItem{EndpointID: v.EndpointID, InboxAddress: v.EndpointAddress, Address: v.Address,
			Reason: SuppressionReason(v.Reason), SourceMessageID: optString(v.SourceMessageID), Since: v.CreatedAt})
	}
	return httpx.NewPageList(items, next), nil
}

func (s *Service) listSuppressions(w http.ResponseWriter, r *http.Request) error {
	companyID, err := pathUUID(r, "companyId", "invalid companyId: must be a UUID")
	if err != nil {
		return err
	}
	p, err := httpx.PageParams(r)
	if err != nil {
		return err
	}
	out, err := s.ListSuppressions(r, httpx.Actor(r), companyID, p)
	if err != nil {
		return err
	}
	noStore(w)
	httpx.WriteJSON(w, http.StatusOK, out)
	return nil
}

// liftSuppression serves DELETE …/suppressions/{address}[?endpointId=]:
// owners and admins lift a suppression (of every inbox of the company, or
// of one), audited per inbox.
func (s *Service) liftSuppression(w http.ResponseWriter, r *http.Request) error {
	companyID, err := pathUUID(r, "companyId", "invalid companyId: must be a UUID")
	if err != nil {
		return err
	}
	a := httpx.Actor(r)
	if err := s.RequireRulesWriter(r.Context(), a, companyID); err != nil {
		return err
	}
	addr := strings.ToLower(strings.TrimSpace(r.PathValue("address")))
	if addr == "" || len(addr) > 320 || !strings.Contains(addr, "@") {
		return httpx.Errorf(http.StatusBadRequest, "address must be an email address")
	}
	endpointID := r.URL.Query().Get("endpointId")
	if endpointID != "" && !store.ValidID(endpointID) {
		return httpx.Errorf(http.StatusBadRequest, "invalid endpointId: must be a UUID")
	}
	var lifted []store.Suppression
	err = s.Store.Tx(r.Context(), func(tx *sql.Tx) error {
		var err error
		if lifted, err = s.Store.LiftSuppression(r.Context(), tx, companyID, endpointID, addr); err != nil {
			return err
		}
		for _, v := range lifted {
			if err := s.Store.Audit(r.Context(), tx, a.AuditActor(), companyID, "email.suppression_lifted", "email_endpoint", v.EndpointID,
				map[string]any{"address": v.Address, "reason": v.Reason}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if len(lifted) == 0 {
		return httpx.Errorf(http.StatusNotFound, "This address is not suppressed")
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"address": addr, "lifted": len(lifted)})
	return nil
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
