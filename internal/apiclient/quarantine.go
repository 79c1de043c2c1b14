package apiclient

import (
	"context"
	"github.com/paperclipai/paperclipai/internal/api"
	"net/http"
	"net/url"

	"github.com/paperclipai/paperclipai/internal/inbound"
)

// InboxQuarantine reads GET /email/inboxes/{endpointId}/quarantine with q
// (reason, cursor).
func (c *Client) InboxQuarantine(ctx context.Context, endpointID string, q url.Values) (api.QuarantinePage, error) {
	return get[api.QuarantinePage](ctx, c, with("/email/inboxes/"+esc(endpointID)+"/quarantine", q))
}

// CompanyQuarantine reads GET /companies/{companyId}/email/quarantine with q
// (reason, cursor).
func (c *Client) CompanyQuarantine(ctx context.Context, companyID string, q url.Values) (api.QuarantinePage, error) {
	return get[api.QuarantinePage](ctx, c, with("/companies/"+esc(companyID)+"/email/quarantine", q))
}

// Quarantined reads GET /email/quarantine/{id}: one quarantined message.
func (c *Client) Quarantined(ctx context.Context, id string) (inbound.QuarantineMessage, error) {
	return get[inbound.QuarantineMessage](ctx, c, "/email/quarantine/"+esc(id))
}

// Release sends POST /email/quarantine/{id}/release: the message is
// admitted as if it had just arrived.
func (c *Client) Release(ctx context.Context, id string) error {
	return c.Do(ctx, http.MethodPost, "/email/quarantine/"+esc(id)+"/release", struct{}{}, nil)
}

// BlockSender sends POST /email/quarantine/{id}/block-sender: blocks the
// message's sender, or with domain its whole domain.
func (c *Client) BlockSender(ctx context.Context, id string, domain bool) error {
	return c.Do(ctx, http.MethodPost, "/email/quarantine/"+esc(id)+"/block-sender", struct {
		Domain bool `json:"domain"`
	}{domain}, nil)
}
