package email

import (
	"context"
	"database/sql"
	"encoding/base64"
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

func encodeSuppressionCursor(c store.SuppressionCursor) string {
	return base64.RawURLEncoding.EncodeToString([]byte(c.CreatedAt.UTC().Format(time.RFC3339Nano) + "|" + c.EndpointID + "|" + c.Address))
}

func decodeSuppressionCursor(v string) (*store.SuppressionCursor, error) {
	bad := httpx.Errorf(http.StatusBadRequest, "cursor is not a nextCursor value of this listing")
	raw, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil {
		return nil, bad
	}
	parts := strings.SplitN(string(raw), "|", 3)
	if len(parts) != 3 || !store.ValidID(parts[1]) {
		return nil, bad
	}
	t, err := time.Parse(time.RFC3339Nano, parts[0])
	if err != nil {
		return nil, bad
	}
	return &store.SuppressionCursor{CreatedAt: t, EndpointID: parts[1], Address: parts[2]}, nil
}

// ListSuppressions returns one page of a company's suppressed recipients
// for a board actor with company access.
func (s *Service) ListSuppressions(r *http.Request, a authz.Actor, companyID, cursor string, limit int) (SuppressionPage, error) {
	out := SuppressionPage{Items: []SuppressionItem{}}
	if err := authz.RequireBoard(a); err != nil {
		return out, err
	}
	if _, err := s.Authz.CompanyAccess(r.Context(), s.Store.DB, a, companyID, false); err != nil {
		return out, err
	}
	var after *store.SuppressionCursor
	if cursor != "" {
		c, err := decodeSuppressionCursor(cursor)
		if err != nil {
			return out, err
		}
		after = c
	}
	rows, err := s.Store.ListSuppressions(r.Context(), s.Store.DB, companyID, after, limit+1)
	if err != nil {
		return out, err
	}
	if len(rows) > limit {
		rows = rows[:limit]
		last := rows[len(rows)-1]
		next := encodeSuppressionCursor(store.SuppressionCursor{CreatedAt: last.CreatedAt, EndpointID: last.EndpointID, Address: last.Address})
		out.NextCursor = &next
	}
	for _, v := range rows {
		out.Items = append(out.Items, SuppressionItem{EndpointID: v.EndpointID, InboxAddress: v.EndpointAddress, Address: v.Address,
			Reason: SuppressionReason(v.Reason), SourceMessageID: optString(v.SourceMessageID), Since: v.CreatedAt})
	}
	return out, nil
}

func (s *Service) listSuppressions(w http.ResponseWriter, r *http.Request) error {
	companyID, err := pathUUID(r, "companyId", "invalid companyId: must be a UUID")
	if err != nil {
		return err
	}
	limit, err := limitParam(r, 50, 200)
	if err != nil {
		return err
	}
	out, err := s.ListSuppressions(r, httpx.Actor(r), companyID, r.URL.Query().Get("cursor"), limit)
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
