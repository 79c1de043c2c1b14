package api

import (
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/paperclipai/paperclipai/internal/authz"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/email"
	"github.com/paperclipai/paperclipai/internal/httpx"
	"github.com/paperclipai/paperclipai/internal/inbound"
	"github.com/paperclipai/paperclipai/internal/inbound/queue"
	"github.com/paperclipai/paperclipai/internal/store"
)

// The receiving pipeline's HTTP edge: the public AgentMail webhook
// receiver and the quarantine routes. internal/inbound speaks no HTTP; these
// handlers read the request, call it and render its answer (a refusal as
// its status and error body, through writeError).

// QuarantinePage is one page of a quarantine listing (docs/api.md, "Email").
type QuarantinePage = httpx.PageList[inbound.QuarantineItem]

// maxWebhookBody bounds a webhook body. AgentMail drops message bodies from
// payloads over 1 MB, so a few MiB covers every legitimate delivery.
const maxWebhookBody = 4 << 20

// WebhookRoute is the route of the AgentMail webhook receiver. It is public
// (no actor): the Svix signature over the body authenticates it.
const WebhookRoute = "POST " + queue.WebhookPath + "{publicId}"

// errWebhookBodyTooBig refuses a webhook body over maxWebhookBody.
var errWebhookBodyTooBig = &domain.Refusal{Kind: domain.KindTooLarge, Message: "Webhook body too large"}

// inboundAPI serves the receiving pipeline's routes.
type inboundAPI struct {
	w  *inbound.Worker
	em *email.Service
	st *store.Store
}

// InboundRoutes mounts the webhook receiver as a public route and the
// quarantine routes behind the email channel's experimental-flag gate
// (em.Gate).
func InboundRoutes(rt httpx.Router, w *inbound.Worker, em *email.Service, st *store.Store) {
	ia := inboundAPI{w: w, em: em, st: st}
	rt.HandlePublic(WebhookRoute, ia.webhook)
	gate := em.Gate
	rt.Handle("GET /api/email/inboxes/{endpointId}/quarantine", gate(ia.listInboxQuarantine))
	rt.Handle("GET /api/companies/{companyId}/email/quarantine", gate(ia.listCompanyQuarantine))
	rt.Handle("GET /api/email/quarantine/{id}", gate(ia.getQuarantined))
	rt.Handle("POST /api/email/quarantine/{id}/release", gate(ia.releaseRoute))
	rt.Handle("POST /api/email/quarantine/{id}/block-sender", gate(ia.blockSenderRoute))
}

// webhook receives one AgentMail webhook delivery: it reads the raw body
// within maxWebhookBody and hands it with the headers to the worker, which
// verifies the signature and admits the event; 204 comes only after the
// commit, so the provider retries anything we lost.
func (ia inboundAPI) webhook(rw http.ResponseWriter, r *http.Request) error {
	body, err := io.ReadAll(http.MaxBytesReader(rw, r.Body, maxWebhookBody))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return errWebhookBodyTooBig
		}
		return httpx.Errorf(http.StatusBadRequest, "Could not read the webhook body")
	}
	if err := ia.w.ReceiveWebhook(r.Context(), r.PathValue("publicId"), r.Header, body); err != nil {
		return err
	}
	rw.WriteHeader(http.StatusNoContent)
	return nil
}

// listQuarantine serves one page of f. Quarantined mail is hostile input
// held back from agents: only board users read it.
func (ia inboundAPI) listQuarantine(rw http.ResponseWriter, r *http.Request, f store.QuarantineFilter) error {
	if f.Reason != "" && !slices.Contains(store.QuarantineReasons, f.Reason) {
		return httpx.Errorf(http.StatusBadRequest, "reason must be one of %s", strings.Join(store.QuarantineReasons, ", "))
	}
	p, err := httpx.PageParams(r)
	if err != nil {
		return err
	}
	rows, err := ia.st.ListQuarantined(r.Context(), ia.st.DB, f, p)
	if err != nil {
		return err
	}
	rows, next := httpx.TrimPage(rows, p, func(m store.QuarantinedMessage) store.Cursor {
		return store.Cursor{At: m.CreatedAt, ID: m.ID}
	})
	items := make([]inbound.QuarantineItem, 0, len(rows))
	for _, m := range rows {
		items = append(items, inbound.QuarantineItemOf(m))
	}
	rw.Header().Set("Cache-Control", "no-store")
	httpx.WriteJSON(rw, http.StatusOK, httpx.NewPageList(items, next))
	return nil
}

func (ia inboundAPI) listInboxQuarantine(rw http.ResponseWriter, r *http.Request) error {
	if err := authz.RequireBoard(httpx.Actor(r)); err != nil {
		return err
	}
	ep, err := ia.em.ReadableEndpoint(r)
	if err != nil {
		return err
	}
	return ia.listQuarantine(rw, r, store.QuarantineFilter{CompanyID: ep.CompanyID, EndpointID: ep.ID, Reason: r.URL.Query().Get("reason")})
}

func (ia inboundAPI) listCompanyQuarantine(rw http.ResponseWriter, r *http.Request) error {
	companyID, err := httpx.PathID(r, "companyId")
	if err != nil {
		return err
	}
	a := httpx.Actor(r)
	if err := authz.RequireBoard(a); err != nil {
		return err
	}
	if _, err := ia.em.Authz.CompanyAccess(r.Context(), ia.st.DB, a, companyID, false); err != nil {
		return err
	}
	f := store.QuarantineFilter{CompanyID: companyID, Reason: r.URL.Query().Get("reason")}
	if id := r.URL.Query().Get("endpointId"); id != "" {
		if !store.ValidID(id) {
			return httpx.Errorf(http.StatusBadRequest, "invalid endpointId: must be a UUID")
		}
		f.EndpointID = id
	}
	return ia.listQuarantine(rw, r, f)
}

// readableQuarantined loads the path's quarantined message for a board
// user with access to its company; anything else is the same 404.
func (ia inboundAPI) readableQuarantined(r *http.Request) (store.QuarantinedMessage, error) {
	notFound := httpx.Errorf(http.StatusNotFound, "Quarantined message not found")
	id := r.PathValue("id")
	if !store.ValidID(id) {
		return store.QuarantinedMessage{}, httpx.Errorf(http.StatusBadRequest, "invalid id: must be a UUID")
	}
	a := httpx.Actor(r)
	if err := authz.RequireBoard(a); err != nil {
		return store.QuarantinedMessage{}, err
	}
	m, err := ia.st.GetQuarantined(r.Context(), ia.st.DB, id)
	if errors.Is(err, store.ErrNotFound) {
		return m, notFound
	}
	if err != nil {
		return m, err
	}
	if _, err := ia.em.Authz.CompanyAccess(r.Context(), ia.st.DB, a, m.CompanyID, false); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return m, notFound
		}
		return m, err
	}
	return m, nil
}

func (ia inboundAPI) getQuarantined(rw http.ResponseWriter, r *http.Request) error {
	m, err := ia.readableQuarantined(r)
	if err != nil {
		return err
	}
	rw.Header().Set("Cache-Control", "no-store")
	httpx.WriteJSON(rw, http.StatusOK, inbound.QuarantineMessageOf(m))
	return nil
}

func (ia inboundAPI) releaseRoute(rw http.ResponseWriter, r *http.Request) error {
	m, err := ia.readableQuarantined(r)
	if err != nil {
		return err
	}
	a := httpx.Actor(r)
	if err := ia.em.RequireRulesWriter(r.Context(), a, m.CompanyID); err != nil {
		return err
	}
	var in struct{}
	if err := httpx.DecodeJSON(rw, r, 1<<10, &in); err != nil {
		return err
	}
	released, err := ia.w.Release(r.Context(), a, m.ID)
	first := err == nil
	if errors.Is(err, inbound.ErrAlreadyReleased) {
		err = nil
	}
	if err != nil {
		return err
	}
	httpx.WriteJSON(rw, http.StatusOK, inbound.ReleaseResult{QuarantineMessage: inbound.QuarantineMessageOf(released), Released: first})
	return nil
}

func (ia inboundAPI) blockSenderRoute(rw http.ResponseWriter, r *http.Request) error {
	m, err := ia.readableQuarantined(r)
	if err != nil {
		return err
	}
	a := httpx.Actor(r)
	if err := ia.em.RequireRulesWriter(r.Context(), a, m.CompanyID); err != nil {
		return err
	}
	var in struct {
		Domain bool `json:"domain"`
	}
	if err := httpx.DecodeJSON(rw, r, 1<<10, &in); err != nil {
		return err
	}
	ep, err := ia.st.GetEndpoint(r.Context(), ia.st.DB, m.EndpointID)
	if err != nil {
		return err
	}
	if ep.Status == domain.EndpointArchived {
		return email.ErrInboxNotActive
	}
	entry, err := ia.em.BlockSender(r.Context(), a, ep, queue.SenderAddress(m.From), in.Domain,
		map[string]any{"quarantineId": m.ID})
	if err != nil {
		return err
	}
	httpx.WriteJSON(rw, http.StatusOK, map[string]any{"blocked": entry, "endpointId": ep.ID})
	return nil
}
