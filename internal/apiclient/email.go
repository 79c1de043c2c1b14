package apiclient

import (
	"context"
	"net/http"
	"net/url"

	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/email"
	"github.com/paperclipai/paperclipai/internal/outbound"
)

// The email routes (docs/email-api-walkthrough.md): saved credentials,
// inboxes, their sender rules, and the send side.

// Connections reads GET /companies/{companyId}/email/connections: the saved
// credentials the caller may use, every page.
func (c *Client) Connections(ctx context.Context, companyID string) ([]email.CredentialOption, error) {
	return all[email.CredentialOption](ctx, c, "/companies/"+esc(companyID)+"/email/connections")
}

// CreateConnection sends POST /companies/{companyId}/email/connections:
// saves an API key as a credential (idempotent on in.IdempotencyKey).
func (c *Client) CreateConnection(ctx context.Context, companyID string, in email.ConnectInput) (domain.EmailConnection, error) {
	return send[domain.EmailConnection](ctx, c, http.MethodPost, "/companies/"+esc(companyID)+"/email/connections", in)
}

// Connection reads GET /companies/{companyId}/email/connections/{connectionId}.
func (c *Client) Connection(ctx context.Context, companyID, connectionID string) (domain.EmailConnection, error) {
	return get[domain.EmailConnection](ctx, c, "/companies/"+esc(companyID)+"/email/connections/"+esc(connectionID))
}

// InspectConnection sends POST …/email/connections/{connectionId}/inspect:
// what the saved credential reaches at the provider.
func (c *Client) InspectConnection(ctx context.Context, companyID, connectionID string) (email.InspectResult, error) {
	return send[email.InspectResult](ctx, c, http.MethodPost, "/companies/"+esc(companyID)+"/email/connections/"+esc(connectionID)+"/inspect", nil)
}

// CheckAddress sends POST …/email/connections/{connectionId}/check-address.
func (c *Client) CheckAddress(ctx context.Context, companyID, connectionID, username, domainName string) (email.AddressCheck, error) {
	return send[email.AddressCheck](ctx, c, http.MethodPost, "/companies/"+esc(companyID)+"/email/connections/"+esc(connectionID)+"/check-address",
		struct {
			Username string `json:"username"`
			Domain   string `json:"domain"`
		}{username, domainName})
}

// connPath is a saved credential's API path plus rest.
func connPath(companyID, connectionID, rest string) string {
	return "/companies/" + esc(companyID) + "/email/connections/" + esc(connectionID) + rest
}

// NewGrant is POST …/email/connections/{connectionId}/grants' body: a
// person's (kind user, with UserID) or the whole company's (organization)
// right to use the credential.
type NewGrant struct {
	Kind   string `json:"kind"`
	UserID string `json:"userId,omitempty"`
}

// AddGrant sends POST …/email/connections/{connectionId}/grants.
func (c *Client) AddGrant(ctx context.Context, companyID, connectionID string, in NewGrant) error {
	return c.Do(ctx, http.MethodPost, connPath(companyID, connectionID, "/grants"), in, nil)
}

// RevokeGrant sends DELETE …/email/connections/{connectionId}/grants/{grantId}.
func (c *Client) RevokeGrant(ctx context.Context, companyID, connectionID, grantID string) error {
	return c.Do(ctx, http.MethodDelete, connPath(companyID, connectionID, "/grants/"+esc(grantID)), nil, nil)
}

// NewInstall is POST …/email/connections/{connectionId}/installs' body:
// one agent (TargetType agent, with TargetID) or every agent (company).
type NewInstall struct {
	TargetType string `json:"targetType"`
	TargetID   string `json:"targetId,omitempty"`
}

// AddInstall sends POST …/email/connections/{connectionId}/installs.
func (c *Client) AddInstall(ctx context.Context, companyID, connectionID string, in NewInstall) error {
	return c.Do(ctx, http.MethodPost, connPath(companyID, connectionID, "/installs"), in, nil)
}

// DeleteInstall sends DELETE …/email/connections/{connectionId}/installs/{installId}.
func (c *Client) DeleteInstall(ctx context.Context, companyID, connectionID, installID string) error {
	return c.Do(ctx, http.MethodDelete, connPath(companyID, connectionID, "/installs/"+esc(installID)), nil, nil)
}

// Inspect sends POST /companies/{companyId}/email/inspect: what an unsaved
// API key reaches (nothing is stored).
func (c *Client) Inspect(ctx context.Context, companyID, apiKey string) (email.InspectResult, error) {
	return send[email.InspectResult](ctx, c, http.MethodPost, "/companies/"+esc(companyID)+"/email/inspect", struct {
		APIKey string `json:"apiKey"`
	}{apiKey})
}

// Inboxes is GET /companies/{companyId}/email/inboxes (filter:
// includeArchived=true).
func (c *Client) Inboxes(companyID string) List[domain.EmailEndpointSummary] {
	return newList[domain.EmailEndpointSummary](c, "/companies/"+esc(companyID)+"/email/inboxes")
}

// SetupInbox sends POST /companies/{companyId}/email/inboxes.
func (c *Client) SetupInbox(ctx context.Context, companyID string, in email.SetupInput) (domain.EmailEndpointSummary, error) {
	return send[domain.EmailEndpointSummary](ctx, c, http.MethodPost, "/companies/"+esc(companyID)+"/email/inboxes", in)
}

// Inbox reads GET /email/inboxes/{endpointId}.
func (c *Client) Inbox(ctx context.Context, endpointID string) (domain.EmailEndpointSummary, error) {
	return get[domain.EmailEndpointSummary](ctx, c, "/email/inboxes/"+esc(endpointID))
}

// Control actions of POST /email/inboxes/{endpointId}/control.
const (
	ActionPause  = "pause"
	ActionResume = "resume"
	ActionRemove = "remove"
)

// ControlInbox sends POST /email/inboxes/{endpointId}/control.
func (c *Client) ControlInbox(ctx context.Context, endpointID, action string) (domain.EmailEndpointSummary, error) {
	return send[domain.EmailEndpointSummary](ctx, c, http.MethodPost, "/email/inboxes/"+esc(endpointID)+"/control", struct {
		Action string `json:"action"`
	}{action})
}

// ReconnectInbox sends POST /email/inboxes/{endpointId}/reconnect.
func (c *Client) ReconnectInbox(ctx context.Context, endpointID string, in email.ReconnectInput) (domain.EmailEndpointSummary, error) {
	return send[domain.EmailEndpointSummary](ctx, c, http.MethodPost, "/email/inboxes/"+esc(endpointID)+"/reconnect", in)
}

// Conversations is GET /companies/{companyId}/email/conversations (filter:
// endpointId), newest activity first.
func (c *Client) Conversations(companyID string) List[email.CompanyConversation] {
	return newList[email.CompanyConversation](c, "/companies/"+esc(companyID)+"/email/conversations")
}

// InboxConversations is GET /email/inboxes/{endpointId}/conversations.
func (c *Client) InboxConversations(endpointID string) List[email.ConversationSummary] {
	return newList[email.ConversationSummary](c, "/email/inboxes/"+esc(endpointID)+"/conversations")
}

// InboxActivity reads GET /email/inboxes/{endpointId}/activity.
func (c *Client) InboxActivity(ctx context.Context, endpointID string) (email.InboxActivity, error) {
	return get[email.InboxActivity](ctx, c, "/email/inboxes/"+esc(endpointID)+"/activity")
}

// SenderRules reads GET /email/inboxes/{endpointId}/sender-rules.
func (c *Client) SenderRules(ctx context.Context, endpointID string) (email.SenderRulesView, error) {
	return get[email.SenderRulesView](ctx, c, "/email/inboxes/"+esc(endpointID)+"/sender-rules")
}

// PutSenderRules sends PUT /email/inboxes/{endpointId}/sender-rules.
func (c *Client) PutSenderRules(ctx context.Context, endpointID string, rules domain.SenderRules) (email.SenderRulesView, error) {
	return send[email.SenderRulesView](ctx, c, http.MethodPut, "/email/inboxes/"+esc(endpointID)+"/sender-rules", rules)
}

// CheckDrift sends POST /email/inboxes/{endpointId}/sender-rules/check-drift.
func (c *Client) CheckDrift(ctx context.Context, endpointID string) (email.SenderRulesView, error) {
	return send[email.SenderRulesView](ctx, c, http.MethodPost, "/email/inboxes/"+esc(endpointID)+"/sender-rules/check-drift", struct{}{})
}

// ResolveDrift sends POST /email/inboxes/{endpointId}/sender-rules/resolve-drift
// (action: email.DriftWriteOurs or email.DriftTakeProvider).
func (c *Client) ResolveDrift(ctx context.Context, endpointID, action string) (email.SenderRulesView, error) {
	return send[email.SenderRulesView](ctx, c, http.MethodPost, "/email/inboxes/"+esc(endpointID)+"/sender-rules/resolve-drift", struct {
		Action string `json:"action"`
	}{action})
}

// Suppressions reads GET /companies/{companyId}/email/suppressions.
func (c *Client) Suppressions(ctx context.Context, companyID string) (email.SuppressionPage, error) {
	return get[email.SuppressionPage](ctx, c, "/companies/"+esc(companyID)+"/email/suppressions")
}

// LiftSuppression sends DELETE /companies/{companyId}/email/suppressions/{address}:
// of one inbox (endpointID) or, with "", of the company.
func (c *Client) LiftSuppression(ctx context.Context, companyID, address, endpointID string) error {
	return c.Do(ctx, http.MethodDelete, with("/companies/"+esc(companyID)+"/email/suppressions/"+esc(address), Query("endpointId", endpointID)), nil, nil)
}

// Send sends POST /companies/{companyId}/email/send: a new email or a reply.
func (c *Client) Send(ctx context.Context, companyID string, req outbound.SendRequest) (outbound.SendSummary, error) {
	return send[outbound.SendSummary](ctx, c, http.MethodPost, "/companies/"+esc(companyID)+"/email/send", req)
}

// Thread reads GET /companies/{companyId}/email/tasks/{issueId}: the task's
// email thread, nil when the task has none.
func (c *Client) Thread(ctx context.Context, companyID, issueID string) (*outbound.ThreadSummary, error) {
	return get[*outbound.ThreadSummary](ctx, c, "/companies/"+esc(companyID)+"/email/tasks/"+esc(issueID))
}

// TaskDeliveries reads GET /companies/{companyId}/email/tasks/{issueId}/deliveries:
// the inbound deliveries of the task's thread with their stage times, every
// page.
func (c *Client) TaskDeliveries(ctx context.Context, companyID, issueID string) ([]outbound.InboundDelivery, error) {
	return all[outbound.InboundDelivery](ctx, c, "/companies/"+esc(companyID)+"/email/tasks/"+esc(issueID)+"/deliveries")
}

// SendStatus reads GET /companies/{companyId}/email/deliveries/{publicationId}.
func (c *Client) SendStatus(ctx context.Context, companyID, publicationID string) (outbound.SendSummary, error) {
	return get[outbound.SendSummary](ctx, c, "/companies/"+esc(companyID)+"/email/deliveries/"+esc(publicationID))
}

// Sends reads GET /companies/{companyId}/email/publications with q
// (outcome, limit, cursor).
func (c *Client) Sends(ctx context.Context, companyID string, q url.Values) (outbound.SendList, error) {
	return get[outbound.SendList](ctx, c, with("/companies/"+esc(companyID)+"/email/publications", q))
}

// ReviewCount reads GET /companies/{companyId}/email/review-count: the sends
// awaiting review.
func (c *Client) ReviewCount(ctx context.Context, companyID string) (int, error) {
	v, err := get[struct {
		AwaitingReview int `json:"awaitingReview"`
	}](ctx, c, "/companies/"+esc(companyID)+"/email/review-count")
	return v.AwaitingReview, err
}

// Review sends POST …/email/deliveries/{publicationId}/review.
func (c *Client) Review(ctx context.Context, companyID, publicationID string, in outbound.ReviewInput) (outbound.SendSummary, error) {
	return send[outbound.SendSummary](ctx, c, http.MethodPost, "/companies/"+esc(companyID)+"/email/deliveries/"+esc(publicationID)+"/review", in)
}

// Resolve sends POST …/email/deliveries/{publicationId}/resolve.
func (c *Client) Resolve(ctx context.Context, companyID, publicationID string, in outbound.ResolveInput) (outbound.SendSummary, error) {
	return send[outbound.SendSummary](ctx, c, http.MethodPost, "/companies/"+esc(companyID)+"/email/deliveries/"+esc(publicationID)+"/resolve", in)
}

// SendPolicy reads GET /email/inboxes/{endpointId}/send-policy.
func (c *Client) SendPolicy(ctx context.Context, endpointID string) (outbound.SendPolicy, error) {
	return get[outbound.SendPolicy](ctx, c, "/email/inboxes/"+esc(endpointID)+"/send-policy")
}

// PutSendPolicy sends PUT /email/inboxes/{endpointId}/send-policy.
func (c *Client) PutSendPolicy(ctx context.Context, endpointID string, p outbound.SendPolicy) (outbound.SendPolicy, error) {
	return send[outbound.SendPolicy](ctx, c, http.MethodPut, "/email/inboxes/"+esc(endpointID)+"/send-policy", p)
}
