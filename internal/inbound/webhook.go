package inbound

import (
	"errors"
	"io"
	"net/http"

	"github.com/paperclipai/paperclipai/internal/agentmail"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/email"
	"github.com/paperclipai/paperclipai/internal/httpx"
)

// WebhookPath is the route of the AgentMail webhook receiver. It is public
// (no actor): the Svix signature over the body authenticates it.
const WebhookPath = "POST /api/chat-webhooks/agentmail/{publicId}"

// maxWebhookBody bounds a webhook body. AgentMail drops message bodies from
// payloads over 1 MB, so a few MiB covers every legitimate delivery.
const maxWebhookBody = 4 << 20

// Webhook errors (docs/email-pipeline.md, "Webhook").
var (
	errWebhookNotFound   = &httpx.Error{Status: http.StatusNotFound, Message: "Email inbox not found"}
	errWebhookDisabled   = &httpx.Error{Status: http.StatusForbidden, Message: "Webhook receiving is not enabled"}
	errWebhookSignature  = &httpx.Error{Status: http.StatusForbidden, Message: "Invalid AgentMail webhook signature"}
	errWebhookBodyTooBig = &httpx.Error{Status: http.StatusRequestEntityTooLarge, Message: "Webhook body too large"}
)

// Routes mounts the webhook receiver as a public route.
func (w *Worker) Routes(rt httpx.Router) { rt.HandlePublic(WebhookPath, w.ServeWebhook) }

// ServeWebhook receives one AgentMail webhook delivery: it reads the raw
// body, verifies the Svix signature over exactly those bytes with the
// inbox's vaulted secret (a changed byte or a stale timestamp is 403),
// checks that the inbox may receive, admits the event durably and answers
// 204 only after the commit, so the provider retries anything we lost.
func (w *Worker) ServeWebhook(rw http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	body, err := io.ReadAll(http.MaxBytesReader(rw, r.Body, maxWebhookBody))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return errWebhookBodyTooBig
		}
		return httpx.Errorf(http.StatusBadRequest, "Could not read the webhook body")
	}
	ep, err := w.st.EndpointByPublicID(ctx, w.q, r.PathValue("publicId"))
	if err != nil {
		return errWebhookNotFound
	}
	if ep.ReceiveMode != domain.ReceiveWebhook || ep.Status == domain.EndpointArchived {
		return errWebhookDisabled
	}
	secret, err := w.o.Email.WebhookSecret(ctx, w.q, ep.ID)
	if err != nil {
		return errWebhookSignature
	}
	v, err := agentmail.NewWebhookVerifier(secret)
	if err != nil {
		return errWebhookSignature
	}
	// Only the three Svix headers take part in verification.
	h := http.Header{}
	for _, k := range []string{"svix-id", "svix-timestamp", "svix-signature"} {
		if val := r.Header.Get(k); val != "" {
			h.Set(k, val)
		}
	}
	if err := v.Verify(body, h); err != nil {
		// Shown in the inbox's health until a delivery verifies (written
		// at most once a minute, however many forged posts arrive).
		if rerr := w.st.RecordEndpointProblem(ctx, w.q, ep.ID, email.ProblemWebhookSignature, email.WebhookSignatureProblem); rerr != nil {
			w.log.Warn("record webhook signature failure", "endpoint", ep.ID, "err", rerr)
		}
		return errWebhookSignature
	}
	if err := w.st.ClearEndpointProblem(ctx, w.q, ep.ID, email.ProblemWebhookSignature); err != nil {
		w.log.Warn("clear webhook signature failure", "endpoint", ep.ID, "err", err)
	}
	if _, _, err := w.o.Email.ActiveEndpoint(ctx, w.q, ep.ID); err != nil {
		return err
	}
	w.webhookVerified(ep.ID)
	if _, err := w.AdmitRaw(ctx, ep, body, SourceWebhook); err != nil {
		return err
	}
	rw.WriteHeader(http.StatusNoContent)
	return nil
}
