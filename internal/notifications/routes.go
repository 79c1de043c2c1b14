package notifications

import (
	"context"
	"database/sql"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/paperclipai/paperclipai/internal/authz"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/httpx"
	"github.com/paperclipai/paperclipai/internal/netguard"
	"github.com/paperclipai/paperclipai/internal/store"
)

// maxWebhooks bounds a company's notification webhooks.
const maxWebhooks = 20

// CreateInput is the body of POST …/notification-webhooks.
type CreateInput struct {
	URL    string   `json:"url"`
	Events []string `json:"events"`
	// Format is "standard" (default: Standard Webhooks JSON) or "slack"
	// ({"text": …} for Slack-compatible incoming webhooks).
	Format string `json:"format,omitempty"`
}

// DeliveryView is one entry of a webhook's delivery log.
type DeliveryView struct {
	ID            string     `json:"id"`
	Event         string     `json:"event"`
	State         string     `json:"state"`
	Attempts      int        `json:"attempts"`
	LastStatus    *int       `json:"lastStatus"`
	LastError     *string    `json:"lastError"`
	NextAttemptAt *time.Time `json:"nextAttemptAt"`
	CreatedAt     time.Time  `json:"createdAt"`
	DeliveredAt   *time.Time `json:"deliveredAt"`
}

// Routes mounts the webhook routes (owners and admins).
func (s *Service) Routes(rt httpx.Router) {
	rt.Handle("GET /api/companies/{companyId}/notification-webhooks", s.listRoute)
	rt.Handle("POST /api/companies/{companyId}/notification-webhooks", s.createRoute)
	rt.Handle("DELETE /api/companies/{companyId}/notification-webhooks/{webhookId}", s.deleteRoute)
	rt.Handle("GET /api/companies/{companyId}/notification-webhooks/{webhookId}/deliveries", s.deliveriesRoute)
}

// manager checks the actor is an owner or admin of the path's company.
func (s *Service) manager(r *http.Request) (string, authz.Actor, error) {
	companyID, err := httpx.PathID(r, "companyId")
	if err != nil {
		return "", authz.Actor{}, err
	}
	a := httpx.Actor(r)
	if err := authz.RequireBoard(a); err != nil {
		return "", a, err
	}
	acc, err := s.Authz.CompanyAccess(r.Context(), s.Store.DB, a, companyID, true)
	if err != nil {
		return "", a, err
	}
	return companyID, a, authz.RequireRole(acc, domain.RoleOwner, domain.RoleAdmin)
}

func (s *Service) createRoute(w http.ResponseWriter, r *http.Request) error {
	companyID, a, err := s.manager(r)
	if err != nil {
		return err
	}
	var in CreateInput
	if err := httpx.DecodeJSON(w, r, s.MaxBody, &in); err != nil {
		return err
	}
	out, err := s.Create(r.Context(), a, companyID, in)
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusCreated, out)
	return nil
}

// Create validates and stores a webhook and returns it with its secret,
// the only time the secret is shown. A URL that does not resolve to a
// public address is refused unless an instance administrator adds it (the
// rule of http agents); delivery checks the address dialled again.
func (s *Service) Create(ctx context.Context, a authz.Actor, companyID string, in CreateInput) (Webhook, error) {
	var zero Webhook
	u, err := url.Parse(in.URL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil || len(in.URL) > 2000 {
		return zero, httpx.Errorf(http.StatusBadRequest, "url must be an http(s) URL without credentials (at most 2000 characters)")
	}
	if in.Format == "" {
		in.Format = "standard"
	}
	if in.Format != "standard" && in.Format != "slack" {
		return zero, httpx.Errorf(http.StatusBadRequest, "format must be standard or slack")
	}
	if len(in.Events) == 0 {
		return zero, httpx.Errorf(http.StatusBadRequest, "events must name at least one of %s", strings.Join(Events(), ", "))
	}
	var evs []string
	for _, e := range in.Events {
		if _, ok := summaryOf(e); !ok {
			return zero, httpx.Errorf(http.StatusBadRequest, "unknown event %q: events are %s", e, strings.Join(Events(), ", "))
		}
		if !slices.Contains(evs, e) {
			evs = append(evs, e)
		}
	}
	admin := a.LocalBoard || a.IsInstanceAdmin
	public := netguard.PublicHost(ctx, u.Hostname())
	if !public && !admin {
		return zero, httpx.Errorf(http.StatusForbidden, "url must resolve to a public address: only an instance administrator may point a webhook at loopback, a private network or a host name that does not resolve")
	}
	secret, err := newSecret()
	if err != nil {
		return zero, err
	}
	h := Webhook{ID: store.NewID(), CompanyID: companyID, URL: in.URL, Events: evs, Format: in.Format, CreatedAt: s.Store.Now()}
	sealed, err := s.Vault.Seal([]byte(secret), sealAAD(h.ID))
	if err != nil {
		return zero, err
	}
	err = s.Store.Tx(ctx, func(tx *sql.Tx) error {
		n, err := s.Store.CountNotificationWebhooks(ctx, tx, companyID)
		if err != nil {
			return err
		}
		if n >= maxWebhooks {
			return httpx.Errorf(http.StatusConflict, "a company may have at most %d notification webhooks", maxWebhooks)
		}
		if err := s.Store.InsertNotificationWebhook(ctx, tx, store.NotificationWebhook{ID: h.ID, CompanyID: companyID, URL: h.URL,
			Events: evs, Format: h.Format, SecretSealed: sealed, PrivateAllowed: !public, CreatedBy: a.ID(), CreatedAt: h.CreatedAt}); err != nil {
			return err
		}
		return s.Store.Audit(ctx, tx, a.AuditActor(), companyID, "notification_webhook.created", "notification_webhook", h.ID,
			map[string]any{"events": evs, "format": h.Format, "host": u.Hostname()})
	})
	if err != nil {
		return zero, err
	}
	h.Secret = secret
	return h, nil
}

// WebhookPage is one page of a company's webhooks, with the events a
// webhook may subscribe to.
type WebhookPage struct {
	Items      []Webhook `json:"items"`
	NextCursor *string   `json:"nextCursor"`
	Events     []string  `json:"events"`
}

func (s *Service) listRoute(w http.ResponseWriter, r *http.Request) error {
	companyID, _, err := s.manager(r)
	if err != nil {
		return err
	}
	p, err := httpx.PageParams(r)
	if err != nil {
		return err
	}
	rows, err := s.Store.NotificationWebhooksPage(r.Context(), s.Store.DB, companyID, p)
	if err != nil {
		return err
	}
	rows, next := httpx.TrimPage(rows, p, store.WebhookCursor)
	items := make([]Webhook, 0, len(rows))
	for _, h := range rows {
		items = append(items, view(h))
	}
	pl := httpx.NewPageList(items, next)
	httpx.WriteJSON(w, http.StatusOK, WebhookPage{Items: pl.Items, NextCursor: pl.NextCursor, Events: Events()})
	return nil
}

func (s *Service) deleteRoute(w http.ResponseWriter, r *http.Request) error {
	companyID, a, err := s.manager(r)
	if err != nil {
		return err
	}
	id := r.PathValue("webhookId")
	if !store.ValidID(id) {
		return httpx.Errorf(http.StatusBadRequest, "webhookId must be a UUID")
	}
	err = s.Store.Tx(r.Context(), func(tx *sql.Tx) error {
		found, err := s.Store.DeleteNotificationWebhook(r.Context(), tx, companyID, id)
		if err != nil {
			return err
		}
		if !found {
			return httpx.Errorf(http.StatusNotFound, "Notification webhook not found")
		}
		return s.Store.Audit(r.Context(), tx, a.AuditActor(), companyID, "notification_webhook.deleted", "notification_webhook", id, map[string]any{})
	})
	if err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// deliveriesRoute serves a webhook's delivery log, newest first, paged by
// the shared cursor (whose id is a delivery's msg_… id here).
func (s *Service) deliveriesRoute(w http.ResponseWriter, r *http.Request) error {
	companyID, _, err := s.manager(r)
	if err != nil {
		return err
	}
	id := r.PathValue("webhookId")
	if !store.ValidID(id) {
		return httpx.Errorf(http.StatusBadRequest, "webhookId must be a UUID")
	}
	p, err := httpx.PageParamsWith(r, store.ValidDeliveryID)
	if err != nil {
		return err
	}
	h, err := s.Store.GetNotificationWebhook(r.Context(), s.Store.DB, id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && h.CompanyID != companyID) {
		return httpx.Errorf(http.StatusNotFound, "Notification webhook not found")
	}
	if err != nil {
		return err
	}
	rows, err := s.Store.NotificationDeliveriesPage(r.Context(), s.Store.DB, companyID, id, p)
	if err != nil {
		return err
	}
	rows, next := httpx.TrimPage(rows, p, store.NotificationDeliveryCursor)
	out := make([]DeliveryView, 0, len(rows))
	for _, d := range rows {
		v := DeliveryView{ID: d.ID, Event: d.Event, State: d.State, Attempts: d.Attempts, LastStatus: d.LastStatus,
			LastError: d.LastError, CreatedAt: d.CreatedAt, DeliveredAt: d.DeliveredAt}
		if d.State == store.NotificationPending {
			v.NextAttemptAt = d.NextAttemptAt
		}
		out = append(out, v)
	}
	httpx.WriteJSON(w, http.StatusOK, httpx.NewPageList(out, next))
	return nil
}
