package inbound

import (
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/paperclipai/paperclipai/internal/authz"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/email"
	"github.com/paperclipai/paperclipai/internal/httpx"
	"github.com/paperclipai/paperclipai/internal/store"
)

// QuarantineItem is one quarantined message in a listing (docs/api.md,
// "Email").
type QuarantineItem struct {
	ID                string    `json:"id"`
	EndpointID        string    `json:"endpointId"`
	ProviderMessageID string    `json:"providerMessageId"`
	From              string    `json:"from"`
	Subject           string    `json:"subject"`
	ReceivedAt        time.Time `json:"receivedAt"`
	Reason            string    `json:"reason"`
	Detail            string    `json:"detail"`
}

// QuarantineMessage is one quarantined message with its text (null once
// purged) and its release.
type QuarantineMessage struct {
	QuarantineItem
	Text       *string    `json:"text"`
	Purged     bool       `json:"purged"`
	ReleasedAt *time.Time `json:"releasedAt"`
}

// QuarantinePage is one page of a quarantine listing.
type QuarantinePage = httpx.PageList[QuarantineItem]

func quarantineItem(m store.QuarantinedMessage) QuarantineItem {
	return QuarantineItem{ID: m.ID, EndpointID: m.EndpointID, ProviderMessageID: m.ProviderMessageID, From: m.From,
		Subject: m.Subject, ReceivedAt: m.ReceivedAt, Reason: m.Reason, Detail: m.Detail}
}

func quarantineMessage(m store.QuarantinedMessage) QuarantineMessage {
	out := QuarantineMessage{QuarantineItem: quarantineItem(m), Purged: m.PurgedAt != nil, ReleasedAt: m.ReleasedAt}
	if m.PurgedAt == nil {
		t := m.BodyText
		out.Text = &t
	}
	return out
}

// QuarantineRoutes mounts the quarantine routes behind gate (the email
// channel's experimental-flag gate).
func (w *Worker) QuarantineRoutes(rt httpx.Router, gate func(httpx.HandlerFunc) httpx.HandlerFunc) {
	rt.Handle("GET /api/email/inboxes/{endpointId}/quarantine", gate(w.listInboxQuarantine))
	rt.Handle("GET /api/companies/{companyId}/email/quarantine", gate(w.listCompanyQuarantine))
	rt.Handle("GET /api/email/quarantine/{id}", gate(w.getQuarantined))
	rt.Handle("POST /api/email/quarantine/{id}/release", gate(w.releaseRoute))
	rt.Handle("POST /api/email/quarantine/{id}/block-sender", gate(w.blockSenderRoute))
}

// listQuarantine serves one page of f. Quarantined mail is hostile input
// held back from agents: only board users read it.
func (w *Worker) listQuarantine(rw http.ResponseWriter, r *http.Request, f store.QuarantineFilter) error {
	if f.Reason != "" && !slices.Contains(store.QuarantineReasons, f.Reason) {
		return httpx.Errorf(http.StatusBadRequest, "reason must be one of %s", strings.Join(store.QuarantineReasons, ", "))
	}
	p, err := httpx.PageParams(r)
	if err != nil {
		return err
	}
	rows, err := w.st.ListQuarantined(r.Context(), w.q, f, p)
	if err != nil {
		return err
	}
	rows, next := httpx.TrimPage(rows, p, func(m store.QuarantinedMessage) store.Cursor {
		return store.Cursor{At: m.CreatedAt, ID: m.ID}
	})
	items := make([]QuarantineItem, 0, len(rows))
	for _, m := range rows {
		items = append(items, quarantineItem(m))
	}
	rw.Header().Set("Cache-Control", "no-store")
	httpx.WriteJSON(rw, http.StatusOK, httpx.NewPageList(items, next))
	return nil
}

func (w *Worker) listInboxQuarantine(rw http.ResponseWriter, r *http.Request) error {
	if err := authz.RequireBoard(httpx.Actor(r)); err != nil {
		return err
	}
	ep, err := w.o.Email.ReadableEndpoint(r)
	if err != nil {
		return err
	}
	return w.listQuarantine(rw, r, store.QuarantineFilter{CompanyID: ep.CompanyID, EndpointID: ep.ID, Reason: r.URL.Query().Get("reason")})
}

func (w *Worker) listCompanyQuarantine(rw http.ResponseWriter, r *http.Request) error {
	companyID, err := httpx.PathID(r, "companyId")
	if err != nil {
		return err
	}
	a := httpx.Actor(r)
	if err := authz.RequireBoard(a); err != nil {
		return err
	}
	if _, err := w.o.Email.Authz.CompanyAccess(r.Context(), w.q, a, companyID, false); err != nil {
		return err
	}
	f := store.QuarantineFilter{CompanyID: companyID, Reason: r.URL.Query().Get("reason")}
	if id := r.URL.Query().Get("endpointId"); id != "" {
		if !store.ValidID(id) {
			return httpx.Errorf(http.StatusBadRequest, "invalid endpointId: must be a UUID")
		}
		f.EndpointID = id
	}
	return w.listQuarantine(rw, r, f)
}

// readableQuarantined loads the path's quarantined message for a board
// user with access to its company; anything else is the same 404.
func (w *Worker) readableQuarantined(r *http.Request) (store.QuarantinedMessage, error) {
	notFound := httpx.Errorf(http.StatusNotFound, "Quarantined message not found")
	id := r.PathValue("id")
	if !store.ValidID(id) {
		return store.QuarantinedMessage{}, httpx.Errorf(http.StatusBadRequest, "invalid id: must be a UUID")
	}
	a := httpx.Actor(r)
	if err := authz.RequireBoard(a); err != nil {
		return store.QuarantinedMessage{}, err
	}
	m, err := w.st.GetQuarantined(r.Context(), w.q, id)
	if errors.Is(err, store.ErrNotFound) {
		return m, notFound
	}
	if err != nil {
		return m, err
	}
	if _, err := w.o.Email.Authz.CompanyAccess(r.Context(), w.q, a, m.CompanyID, false); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return m, notFound
		}
		return m, err
	}
	return m, nil
}

func (w *Worker) getQuarantined(rw http.ResponseWriter, r *http.Request) error {
	m, err := w.readableQuarantined(r)
	if err != nil {
		return err
	}
	rw.Header().Set("Cache-Control", "no-store")
	httpx.WriteJSON(rw, http.StatusOK, quarantineMessage(m))
	return nil
}

// ReleaseResult is the answer of a release: the message, and whether this
// call released it (false: it was released before; nothing changed).
type ReleaseResult struct {
	QuarantineMessage
	Released bool `json:"released"`
}

func (w *Worker) releaseRoute(rw http.ResponseWriter, r *http.Request) error {
	m, err := w.readableQuarantined(r)
	if err != nil {
		return err
	}
	a := httpx.Actor(r)
	if err := w.o.Email.RequireRulesWriter(r.Context(), a, m.CompanyID); err != nil {
		return err
	}
	var in struct{}
	if err := httpx.DecodeJSON(rw, r, 1<<10, &in); err != nil {
		return err
	}
	released, err := w.Release(r.Context(), a, m.ID)
	first := err == nil
	if errors.Is(err, ErrAlreadyReleased) {
		err = nil
	}
	if err != nil {
		return err
	}
	httpx.WriteJSON(rw, http.StatusOK, ReleaseResult{QuarantineMessage: quarantineMessage(released), Released: first})
	return nil
}

func (w *Worker) blockSenderRoute(rw http.ResponseWriter, r *http.Request) error {
	m, err := w.readableQuarantined(r)
	if err != nil {
		return err
	}
	a := httpx.Actor(r)
	if err := w.o.Email.RequireRulesWriter(r.Context(), a, m.CompanyID); err != nil {
		return err
	}
	var in struct {
		Domain bool `json:"domain"`
	}
	if err := httpx.DecodeJSON(rw, r, 1<<10, &in); err != nil {
		return err
	}
	ep, err := w.st.GetEndpoint(r.Context(), w.q, m.EndpointID)
	if err != nil {
		return err
	}
	if ep.Status == domain.EndpointArchived {
		return email.ErrInboxNotActive
	}
	entry, err := w.o.Email.BlockSender(r.Context(), a, ep, senderAddress(m.From), in.Domain,
		map[string]any{"quarantineId": m.ID})
	if err != nil {
		return err
	}
	httpx.WriteJSON(rw, http.StatusOK, map[string]any{"blocked": entry, "endpointId": ep.ID})
	return nil
}
