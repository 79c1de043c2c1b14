package agentmail

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// ListParams are the pagination parameters of the inbox, domain and webhook
// listings. Zero values are omitted from the query.
type ListParams struct {
	// Limit is the page size (the reference client uses 100).
	Limit int
	// PageToken continues from a previous page's NextPageToken.
	PageToken string
	// Ascending flips the default newest-first order.
	Ascending bool
}

func (p ListParams) query() url.Values {
	q := url.Values{}
	if p.Limit > 0 {
		q.Set("limit", strconv.Itoa(p.Limit))
	}
	if p.PageToken != "" {
		q.Set("page_token", p.PageToken)
	}
	if p.Ascending {
		q.Set("ascending", "true")
	}
	return q
}

// ListMessagesParams are the query parameters of a message listing. Zero
// values are omitted.
type ListMessagesParams struct {
	// Limit is the page size (the catch-up scan uses 100).
	Limit int
	// PageToken continues from a previous page's NextPageToken.
	PageToken string
	// Ascending lists oldest first (by the sender's timestamp).
	Ascending bool
	// After and Before filter on the message timestamp.
	After, Before time.Time
	// Labels keeps only messages carrying every listed label; each label is
	// sent as a repeated query parameter.
	Labels []string
	// IncludeSpam, IncludeBlocked and IncludeUnauthenticated list the mail
	// the provider filtered too (hidden by default; also needs the key's
	// label_*_read permission).
	IncludeSpam, IncludeBlocked, IncludeUnauthenticated bool
}

func (p ListMessagesParams) query() url.Values {
	q := ListParams{Limit: p.Limit, PageToken: p.PageToken, Ascending: p.Ascending}.query()
	if !p.After.IsZero() {
		q.Set("after", p.After.UTC().Format(time.RFC3339Nano))
	}
	if !p.Before.IsZero() {
		q.Set("before", p.Before.UTC().Format(time.RFC3339Nano))
	}
	for _, l := range p.Labels {
		q.Add("labels", l)
	}
	for _, inc := range []struct {
		on   bool
		name string
	}{{p.IncludeSpam, "include_spam"}, {p.IncludeBlocked, "include_blocked"}, {p.IncludeUnauthenticated, "include_unauthenticated"}} {
		if inc.on {
			q.Set(inc.name, "true")
		}
	}
	return q
}

// ThreadParams paginate the messages of a large thread. Zero values are
// omitted.
type ThreadParams struct {
	// Limit is the number of messages per page (at most 100).
	Limit int
	// PageToken continues from a previous page's NextPageToken.
	PageToken string
}

// InspectKey returns the scope of the client's key (GET /auth/me,
// operation inspect_key).
func (c *Client) InspectKey(ctx context.Context) (*Identity, error) {
	return call[Identity](ctx, c, request{method: http.MethodGet, path: "/auth/me"})
}

// ListInboxes returns one page of the inboxes visible to the key (GET
// /inboxes, operation list_inboxes).
func (c *Client) ListInboxes(ctx context.Context, p ListParams) (*ListInboxesResponse, error) {
	return call[ListInboxesResponse](ctx, c, request{method: http.MethodGet, path: "/inboxes", query: p.query()})
}

// GetInbox returns one inbox (GET /inboxes/{id}, operation get_inbox).
func (c *Client) GetInbox(ctx context.Context, inboxID string) (*Inbox, error) {
	path, err := pathOf(OpGetInbox, lit("inboxes"), id("inbox id", inboxID))
	if err != nil {
		return nil, err
	}
	return call[Inbox](ctx, c, request{method: http.MethodGet, path: path})
}

// CreateInbox creates an inbox (POST /inboxes, operation create_inbox).
// A repeated call with the same ClientID returns the original inbox.
func (c *Client) CreateInbox(ctx context.Context, in CreateInboxRequest) (*Inbox, error) {
	return call[Inbox](ctx, c, request{method: http.MethodPost, path: "/inboxes", body: in})
}

// ListDomains returns one page of custom domains (GET /domains, operation
// list_domains). List items carry no status; use [Client.GetDomain].
func (c *Client) ListDomains(ctx context.Context, p ListParams) (*ListDomainsResponse, error) {
	return call[ListDomainsResponse](ctx, c, request{method: http.MethodGet, path: "/domains", query: p.query()})
}

// GetDomain returns one domain with its verification status (GET
// /domains/{id}, operation get_domain).
func (c *Client) GetDomain(ctx context.Context, domainID string) (*Domain, error) {
	path, err := pathOf(OpGetDomain, lit("domains"), id("domain id", domainID))
	if err != nil {
		return nil, err
	}
	return call[Domain](ctx, c, request{method: http.MethodGet, path: path})
}

// CreateInboxAPIKey creates an inbox-scoped API key (POST
// /inboxes/{id}/api-keys, operation create_inbox_key). The returned APIKey
// is a secret shown only once.
func (c *Client) CreateInboxAPIKey(ctx context.Context, inboxID string, in CreateAPIKeyRequest) (*CreateAPIKeyResponse, error) {
	path, err := pathOf(OpCreateInboxKey, lit("inboxes"), id("inbox id", inboxID), lit("api-keys"))
	if err != nil {
		return nil, err
	}
	return call[CreateAPIKeyResponse](ctx, c, request{method: http.MethodPost, path: path, body: in})
}

// DeleteInboxAPIKey deletes an inbox-scoped API key (DELETE
// /inboxes/{id}/api-keys/{keyId}, operation delete_inbox_key).
func (c *Client) DeleteInboxAPIKey(ctx context.Context, inboxID, apiKeyID string) error {
	path, err := pathOf(OpDeleteInboxKey, lit("inboxes"), id("inbox id", inboxID), lit("api-keys"), id("API key id", apiKeyID))
	if err != nil {
		return err
	}
	return c.do(ctx, request{method: http.MethodDelete, path: path})
}

// CreateInboxWebhook registers a webhook for one inbox (POST
// /inboxes/{id}/webhooks, operation create_webhook). The returned Secret is
// the Svix signing secret.
func (c *Client) CreateInboxWebhook(ctx context.Context, inboxID string, in CreateWebhookRequest) (*Webhook, error) {
	path, err := pathOf(OpCreateWebhook, lit("inboxes"), id("inbox id", inboxID), lit("webhooks"))
	if err != nil {
		return nil, err
	}
	return call[Webhook](ctx, c, request{method: http.MethodPost, path: path, body: in})
}

// ListInboxWebhooks returns one page of an inbox's webhooks (GET
// /inboxes/{id}/webhooks; not one of the fixed operations, so errors name
// operation "request").
func (c *Client) ListInboxWebhooks(ctx context.Context, inboxID string, p ListParams) (*ListWebhooksResponse, error) {
	path, err := pathOf(OpRequest, lit("inboxes"), id("inbox id", inboxID), lit("webhooks"))
	if err != nil {
		return nil, err
	}
	return call[ListWebhooksResponse](ctx, c, request{method: http.MethodGet, path: path, query: p.query()})
}

// DeleteInboxWebhook deletes an inbox webhook (DELETE
// /inboxes/{id}/webhooks/{webhookId}, operation delete_webhook).
func (c *Client) DeleteInboxWebhook(ctx context.Context, inboxID, webhookID string) error {
	path, err := pathOf(OpDeleteWebhook, lit("inboxes"), id("inbox id", inboxID), lit("webhooks"), id("webhook id", webhookID))
	if err != nil {
		return err
	}
	return c.do(ctx, request{method: http.MethodDelete, path: path})
}

// ListMessages returns one page of message metadata (GET
// /inboxes/{id}/messages, operation list_messages). Pages are ordered by
// the sender's timestamp, so a complete scan must follow NextPageToken to
// the end.
func (c *Client) ListMessages(ctx context.Context, inboxID string, p ListMessagesParams) (*ListMessagesResponse, error) {
	path, err := pathOf(OpListMessages, lit("inboxes"), id("inbox id", inboxID), lit("messages"))
	if err != nil {
		return nil, err
	}
	var out ListMessagesResponse
	var status int
	if err := c.do(ctx, request{method: http.MethodGet, path: path, query: p.query(), out: &out, status: &status}); err != nil {
		return nil, err
	}
	for i := range out.Messages {
		if out.Messages[i].MessageID == "" {
			return nil, &ResponseError{Operation: OpListMessages, Status: status, Detail: "missing message_id", kind: ErrMalformedResponse}
		}
	}
	return &out, nil
}

// GetMessage returns the authoritative full message (GET
// /inboxes/{id}/messages/{mid}, operation get_message). A message lacking
// inbox_id, thread_id, message_id or timestamp fails with
// [ErrMalformedResponse].
func (c *Client) GetMessage(ctx context.Context, inboxID, messageID string) (*Message, error) {
	path, err := pathOf(OpGetMessage, lit("inboxes"), id("inbox id", inboxID), lit("messages"), id("message id", messageID))
	if err != nil {
		return nil, err
	}
	var out Message
	var status int
	if err := c.do(ctx, request{method: http.MethodGet, path: path, out: &out, status: &status}); err != nil {
		return nil, err
	}
	if d := out.validate(); d != "" {
		return nil, &ResponseError{Operation: OpGetMessage, Status: status, Detail: d, kind: ErrMalformedResponse}
	}
	return &out, nil
}

// GetThread returns a thread with its messages in ascending timestamp order
// (GET /inboxes/{id}/threads/{tid}, operation get_thread). Every message is
// validated like [Client.GetMessage].
func (c *Client) GetThread(ctx context.Context, inboxID, threadID string, p ThreadParams) (*Thread, error) {
	path, err := pathOf(OpGetThread, lit("inboxes"), id("inbox id", inboxID), lit("threads"), id("thread id", threadID))
	if err != nil {
		return nil, err
	}
	q := ListParams{Limit: p.Limit, PageToken: p.PageToken}.query()
	var out Thread
	var status int
	if err := c.do(ctx, request{method: http.MethodGet, path: path, query: q, out: &out, status: &status}); err != nil {
		return nil, err
	}
	for i := range out.Messages {
		if d := out.Messages[i].validate(); d != "" {
			return nil, &ResponseError{Operation: OpGetThread, Status: status, Detail: d, kind: ErrMalformedResponse}
		}
	}
	return &out, nil
}

// SendMessage sends a new email from inboxID (POST
// /inboxes/{id}/messages/send, operation send_message). A non-empty
// idempotencyKey is sent as the Idempotency-Key header: repeating the call
// with the same key and request returns the original result without a
// second email.
func (c *Client) SendMessage(ctx context.Context, inboxID string, in SendMessageRequest, idempotencyKey string) (*SendMessageResponse, error) {
	path, err := pathOf(OpSendMessage, lit("inboxes"), id("inbox id", inboxID), lit("messages"), lit("send"))
	if err != nil {
		return nil, err
	}
	return c.send(ctx, path, in, idempotencyKey)
}

// ReplyToMessage replies to messageID from inboxID (POST
// /inboxes/{id}/messages/{mid}/reply, operation reply_message), with the
// same idempotency semantics as [Client.SendMessage].
func (c *Client) ReplyToMessage(ctx context.Context, inboxID, messageID string, in ReplyRequest, idempotencyKey string) (*SendMessageResponse, error) {
	path, err := pathOf(OpReplyMessage, lit("inboxes"), id("inbox id", inboxID), lit("messages"), id("message id", messageID), lit("reply"))
	if err != nil {
		return nil, err
	}
	return c.send(ctx, path, in, idempotencyKey)
}

// ReplyAllToMessage replies to every visible recipient of messageID (POST
// /inboxes/{id}/messages/{mid}/reply-all; not a fixed operation, so errors
// name operation "request"). Paperclip's own reply-all computes recipients
// itself and uses [Client.ReplyToMessage]; this method exists for
// completeness.
func (c *Client) ReplyAllToMessage(ctx context.Context, inboxID, messageID string, in ReplyAllRequest, idempotencyKey string) (*SendMessageResponse, error) {
	path, err := pathOf(OpRequest, lit("inboxes"), id("inbox id", inboxID), lit("messages"), id("message id", messageID), lit("reply-all"))
	if err != nil {
		return nil, err
	}
	return c.send(ctx, path, in, idempotencyKey)
}

func (c *Client) send(ctx context.Context, path string, body any, idempotencyKey string) (*SendMessageResponse, error) {
	var out SendMessageResponse
	var status int
	err := c.do(ctx, request{method: http.MethodPost, path: path, body: body, idempotencyKey: idempotencyKey, out: &out, status: &status})
	if err != nil {
		return nil, err
	}
	if out.MessageID == "" || out.ThreadID == "" {
		return nil, &ResponseError{Operation: OperationFor(http.MethodPost, path), Status: status, Detail: "missing message_id or thread_id", kind: ErrMalformedResponse}
	}
	return &out, nil
}

// GetAttachment returns the locator of an attachment, including its
// pre-signed DownloadURL (GET /inboxes/{id}/messages/{mid}/attachments/{aid},
// operation get_attachment). Fetch the bytes with
// [Client.DownloadAttachment].
func (c *Client) GetAttachment(ctx context.Context, inboxID, messageID, attachmentID string) (*AttachmentResponse, error) {
	path, err := pathOf(OpGetAttachment, lit("inboxes"), id("inbox id", inboxID), lit("messages"), id("message id", messageID),
		lit("attachments"), id("attachment id", attachmentID))
	if err != nil {
		return nil, err
	}
	var out AttachmentResponse
	var status int
	if err := c.do(ctx, request{method: http.MethodGet, path: path, out: &out, status: &status}); err != nil {
		return nil, err
	}
	if out.DownloadURL == "" {
		return nil, &ResponseError{Operation: OpGetAttachment, Status: status, Detail: "missing download_url", kind: ErrMalformedResponse}
	}
	return &out, nil
}

// call runs r and decodes the answer into a new T.
func call[T any](ctx context.Context, c *Client, r request) (*T, error) {
	var out T
	r.out = &out
	if err := c.do(ctx, r); err != nil {
		return nil, err
	}
	return &out, nil
}
