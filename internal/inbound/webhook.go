package inbound

import (
	"context"
	"net/http"

	"github.com/paperclipai/paperclipai/internal/agentmail"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/email"
	"github.com/paperclipai/paperclipai/internal/inbound/queue"
)

// Webhook refusals (docs/email-pipeline.md, "Webhook").
var (
	errWebhookNotFound  = &domain.Refusal{Kind: domain.KindNotFound, Message: "Email inbox not found"}
	errWebhookDisabled  = &domain.Refusal{Kind: domain.KindForbidden, Message: "Webhook receiving is not enabled"}
	errWebhookSignature = &domain.Refusal{Kind: domain.KindForbidden, Message: "Invalid AgentMail webhook signature"}
)

// ReceiveWebhook receives one AgentMail webhook delivery for the inbox
// with public id publicID (the API's public route at queue.WebhookPath
// reads the body, bounded, and calls it): it verifies the Svix signature
// over exactly body with the inbox's vaulted secret (a changed byte or a
// stale timestamp is a forbidden refusal), checks that the inbox may
// receive and admits the event durably. It returns nil only after the
// commit, so the provider retries anything we lost; a refusal is a
// *domain.Refusal (or the email service's refusal of an inbox that may not
// receive), anything else a fault.
func (w *Worker) ReceiveWebhook(ctx context.Context, publicID string, header http.Header, body []byte) error {
	ep, err := w.st.EndpointByPublicID(ctx, w.q, publicID)
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
		if val := header.Get(k); val != "" {
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
	_, err = w.AdmitRaw(ctx, ep, body, queue.SourceWebhook)
	return err
}
