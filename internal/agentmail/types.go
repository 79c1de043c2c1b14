package agentmail

import (
	"strings"
	"time"
)

// The wire types below follow the official AgentMail SDK serialization
// (agentmail npm 0.5.27, dist/cjs/serialization). Field names are the exact
// snake_case JSON keys. Optional provider fields are omitted on output when
// empty; on input a missing or null field decodes to the zero value.

// Key scope types reported by [Identity.ScopeType].
const (
	ScopeOrganization = "organization"
	ScopePod          = "pod"
	ScopeInbox        = "inbox"
)

// Identity is the response of GET /auth/me: the scope of the calling key.
type Identity struct {
	ScopeType      string `json:"scope_type"`
	ScopeID        string `json:"scope_id"`
	OrganizationID string `json:"organization_id"`
	PodID          string `json:"pod_id,omitempty"`
	InboxID        string `json:"inbox_id,omitempty"`
	APIKeyID       string `json:"api_key_id,omitempty"`
}

// Inbox is an AgentMail inbox. InboxID is the email address.
type Inbox struct {
	PodID       string         `json:"pod_id"`
	InboxID     string         `json:"inbox_id"`
	Email       string         `json:"email"`
	DisplayName string         `json:"display_name,omitempty"`
	ClientID    string         `json:"client_id,omitempty"`
	Metadata    map[string]any `json:"metadata,omitempty"`
	UpdatedAt   time.Time      `json:"updated_at"`
	CreatedAt   time.Time      `json:"created_at"`
}

// ListInboxesResponse is one page of GET /inboxes.
type ListInboxesResponse struct {
	Count         int     `json:"count"`
	Limit         int     `json:"limit,omitempty"`
	NextPageToken string  `json:"next_page_token,omitempty"`
	Inboxes       []Inbox `json:"inboxes"`
}

// CreateInboxRequest is the body of POST /inboxes. ClientID makes the
// creation idempotent; Paperclip uses "paperclip-<endpointId>".
type CreateInboxRequest struct {
	Username    string         `json:"username,omitempty"`
	Domain      string         `json:"domain,omitempty"`
	DisplayName string         `json:"display_name,omitempty"`
	ClientID    string         `json:"client_id,omitempty"`
	Metadata    map[string]any `json:"metadata,omitempty"`
}

// Domain verification statuses reported by [Domain.Status].
const (
	DomainNotStarted = "NOT_STARTED"
	DomainPending    = "PENDING"
	DomainInvalid    = "INVALID"
	DomainFailed     = "FAILED"
	DomainVerifying  = "VERIFYING"
	DomainVerified   = "VERIFIED"
)

// VerificationRecord is a DNS record a custom domain needs.
type VerificationRecord struct {
	Type     string `json:"type"`
	Name     string `json:"name"`
	Value    string `json:"value"`
	Status   string `json:"status"`
	Priority *int   `json:"priority,omitempty"`
	Reason   string `json:"reason,omitempty"`
}

// Domain is a custom domain with its verification state (GET /domains/{id}).
type Domain struct {
	PodID             string               `json:"pod_id,omitempty"`
	DomainID          string               `json:"domain_id"`
	Domain            string               `json:"domain"`
	Status            string               `json:"status"`
	Reason            string               `json:"reason,omitempty"`
	FeedbackEnabled   bool                 `json:"feedback_enabled"`
	SubdomainsEnabled bool                 `json:"subdomains_enabled"`
	TrackingEnabled   bool                 `json:"tracking_enabled"`
	Records           []VerificationRecord `json:"records"`
	ClientID          string               `json:"client_id,omitempty"`
	UpdatedAt         time.Time            `json:"updated_at"`
	CreatedAt         time.Time            `json:"created_at"`
}

// Verified reports whether the domain may be used for inboxes.
func (d *Domain) Verified() bool { return d.Status == DomainVerified }

// DomainItem is a list element of GET /domains; it has no status, so
// callers fetch each domain to learn whether it is verified.
type DomainItem struct {
	PodID             string    `json:"pod_id,omitempty"`
	DomainID          string    `json:"domain_id"`
	Domain            string    `json:"domain"`
	FeedbackEnabled   bool      `json:"feedback_enabled"`
	SubdomainsEnabled bool      `json:"subdomains_enabled"`
	TrackingEnabled   bool      `json:"tracking_enabled"`
	ClientID          string    `json:"client_id,omitempty"`
	UpdatedAt         time.Time `json:"updated_at"`
	CreatedAt         time.Time `json:"created_at"`
}

// ListDomainsResponse is one page of GET /domains.
type ListDomainsResponse struct {
	Count         int          `json:"count"`
	Limit         int          `json:"limit,omitempty"`
	NextPageToken string       `json:"next_page_token,omitempty"`
	Domains       []DomainItem `json:"domains"`
}

// APIKeyPermissions restricts a new API key. A nil *APIKeyPermissions
// (field omitted) means full access within the key's scope; a present
// object grants only the fields set to true.
type APIKeyPermissions struct {
	InboxRead                *bool `json:"inbox_read,omitempty"`
	InboxCreate              *bool `json:"inbox_create,omitempty"`
	InboxUpdate              *bool `json:"inbox_update,omitempty"`
	InboxDelete              *bool `json:"inbox_delete,omitempty"`
	MessageRead              *bool `json:"message_read,omitempty"`
	MessageSend              *bool `json:"message_send,omitempty"`
	MessageUpdate            *bool `json:"message_update,omitempty"`
	MessageDelete            *bool `json:"message_delete,omitempty"`
	LabelSpamRead            *bool `json:"label_spam_read,omitempty"`
	LabelBlockedRead         *bool `json:"label_blocked_read,omitempty"`
	LabelUnauthenticatedRead *bool `json:"label_unauthenticated_read,omitempty"`
	LabelTrashRead           *bool `json:"label_trash_read,omitempty"`
	DraftRead                *bool `json:"draft_read,omitempty"`
	DraftCreate              *bool `json:"draft_create,omitempty"`
	DraftUpdate              *bool `json:"draft_update,omitempty"`
	DraftDelete              *bool `json:"draft_delete,omitempty"`
	DraftSend                *bool `json:"draft_send,omitempty"`
	WebhookRead              *bool `json:"webhook_read,omitempty"`
	WebhookCreate            *bool `json:"webhook_create,omitempty"`
	WebhookUpdate            *bool `json:"webhook_update,omitempty"`
	WebhookDelete            *bool `json:"webhook_delete,omitempty"`
	DomainRead               *bool `json:"domain_read,omitempty"`
	DomainCreate             *bool `json:"domain_create,omitempty"`
	DomainUpdate             *bool `json:"domain_update,omitempty"`
	DomainDelete             *bool `json:"domain_delete,omitempty"`
	ListEntryRead            *bool `json:"list_entry_read,omitempty"`
	ListEntryCreate          *bool `json:"list_entry_create,omitempty"`
	ListEntryDelete          *bool `json:"list_entry_delete,omitempty"`
	MetricsRead              *bool `json:"metrics_read,omitempty"`
	APIKeyRead               *bool `json:"api_key_read,omitempty"`
	APIKeyCreate             *bool `json:"api_key_create,omitempty"`
	APIKeyUpdate             *bool `json:"api_key_update,omitempty"`
	APIKeyDelete             *bool `json:"api_key_delete,omitempty"`
	PodRead                  *bool `json:"pod_read,omitempty"`
	PodCreate                *bool `json:"pod_create,omitempty"`
	PodDelete                *bool `json:"pod_delete,omitempty"`
}

// CreateAPIKeyRequest is the body of POST /inboxes/{id}/api-keys.
// Paperclip sends {"name":"Paperclip email runtime"}.
type CreateAPIKeyRequest struct {
	Name        string             `json:"name,omitempty"`
	Permissions *APIKeyPermissions `json:"permissions,omitempty"`
}

// CreateAPIKeyResponse is the response of an API key creation; it is the
// only time the secret APIKey is returned. Treat APIKey as a secret.
type CreateAPIKeyResponse struct {
	APIKeyID    string             `json:"api_key_id"`
	APIKey      string             `json:"api_key"`
	Prefix      string             `json:"prefix"`
	Name        string             `json:"name"`
	PodID       string             `json:"pod_id,omitempty"`
	InboxID     string             `json:"inbox_id,omitempty"`
	Permissions *APIKeyPermissions `json:"permissions,omitempty"`
	CreatedAt   time.Time          `json:"created_at"`
}

// Event types of AgentMail webhooks and WebSocket subscriptions.
const (
	EventMessageReceived                = "message.received"
	EventMessageReceivedSpam            = "message.received.spam"
	EventMessageReceivedBlocked         = "message.received.blocked"
	EventMessageReceivedUnauthenticated = "message.received.unauthenticated"
	EventMessageSent                    = "message.sent"
	EventMessageDelivered               = "message.delivered"
	EventMessageBounced                 = "message.bounced"
	EventMessageComplained              = "message.complained"
	EventMessageRejected                = "message.rejected"
	EventMessageOpened                  = "message.opened"
	EventDomainVerified                 = "domain.verified"
)

// ChannelEventTypes returns the six event types Paperclip subscribes to and
// admits (docs/email-pipeline.md, "The provider client"), in a fresh slice.
func ChannelEventTypes() []string {
	return []string{
		EventMessageReceived, EventMessageSent, EventMessageDelivered,
		EventMessageBounced, EventMessageComplained, EventMessageRejected,
	}
}

// Webhook is an AgentMail webhook registration. Secret ("whsec_...") is the
// Svix signing secret; treat it as a credential.
type Webhook struct {
	WebhookID  string    `json:"webhook_id"`
	URL        string    `json:"url"`
	EventTypes []string  `json:"event_types,omitempty"`
	PodIDs     []string  `json:"pod_ids,omitempty"`
	InboxIDs   []string  `json:"inbox_ids,omitempty"`
	Secret     string    `json:"secret"`
	Enabled    bool      `json:"enabled"`
	UpdatedAt  time.Time `json:"updated_at"`
	CreatedAt  time.Time `json:"created_at"`
	ClientID   string    `json:"client_id,omitempty"`
}

// CreateWebhookRequest is the body of POST /inboxes/{id}/webhooks.
type CreateWebhookRequest struct {
	URL        string            `json:"url"`
	EventTypes []string          `json:"event_types"`
	ClientID   string            `json:"client_id,omitempty"`
	Headers    map[string]string `json:"headers,omitempty"`
}

// ListWebhooksResponse is one page of a webhook listing.
type ListWebhooksResponse struct {
	Count         int       `json:"count"`
	Limit         int       `json:"limit,omitempty"`
	NextPageToken string    `json:"next_page_token,omitempty"`
	Webhooks      []Webhook `json:"webhooks"`
}

// Attachment describes an attachment of a message.
type Attachment struct {
	AttachmentID       string `json:"attachment_id"`
	Filename           string `json:"filename,omitempty"`
	Size               int64  `json:"size"`
	ContentType        string `json:"content_type,omitempty"`
	ContentDisposition string `json:"content_disposition,omitempty"`
	ContentID          string `json:"content_id,omitempty"`
}

// AttachmentResponse is the attachment locator returned by GET
// .../attachments/{id}. DownloadURL is a pre-signed bearer capability: never
// log it.
type AttachmentResponse struct {
	AttachmentID       string    `json:"attachment_id"`
	Filename           string    `json:"filename,omitempty"`
	Size               int64     `json:"size"`
	ContentType        string    `json:"content_type,omitempty"`
	ContentDisposition string    `json:"content_disposition,omitempty"`
	ContentID          string    `json:"content_id,omitempty"`
	DownloadURL        string    `json:"download_url"`
	ExpiresAt          time.Time `json:"expires_at,omitzero"`
}

// MessageItem is a message without bodies, as returned by message listings.
// The catch-up scan uses MessageID, CreatedAt and Timestamp.
type MessageItem struct {
	InboxID     string            `json:"inbox_id"`
	ThreadID    string            `json:"thread_id"`
	MessageID   string            `json:"message_id"`
	Labels      []string          `json:"labels"`
	Timestamp   time.Time         `json:"timestamp"`
	From        string            `json:"from"`
	To          []string          `json:"to"`
	Cc          []string          `json:"cc,omitempty"`
	Bcc         []string          `json:"bcc,omitempty"`
	Subject     string            `json:"subject,omitempty"`
	Preview     string            `json:"preview,omitempty"`
	Attachments []Attachment      `json:"attachments,omitempty"`
	InReplyTo   string            `json:"in_reply_to,omitempty"`
	References  []string          `json:"references,omitempty"`
	Headers     map[string]string `json:"headers,omitempty"`
	Size        int64             `json:"size"`
	UpdatedAt   time.Time         `json:"updated_at,omitzero"`
	CreatedAt   time.Time         `json:"created_at,omitzero"`
}

// ListMessagesResponse is one page of GET /inboxes/{id}/messages. An empty
// NextPageToken marks the last page.
type ListMessagesResponse struct {
	Count         int           `json:"count"`
	Limit         int           `json:"limit,omitempty"`
	NextPageToken string        `json:"next_page_token,omitempty"`
	Messages      []MessageItem `json:"messages"`
}

// DefaultSubject is the subject reported for a message without one.
const DefaultSubject = "(No subject)"

// Message is a full message (GET /inboxes/{id}/messages/{mid}, thread
// messages and message.received events). From is a single address string,
// possibly "Name <addr>".
type Message struct {
	InboxID       string            `json:"inbox_id"`
	ThreadID      string            `json:"thread_id"`
	MessageID     string            `json:"message_id"`
	Labels        []string          `json:"labels"`
	Timestamp     time.Time         `json:"timestamp"`
	From          string            `json:"from"`
	ReplyTo       []string          `json:"reply_to,omitempty"`
	To            []string          `json:"to"`
	Cc            []string          `json:"cc,omitempty"`
	Bcc           []string          `json:"bcc,omitempty"`
	Subject       string            `json:"subject,omitempty"`
	Preview       string            `json:"preview,omitempty"`
	Text          string            `json:"text,omitempty"`
	HTML          string            `json:"html,omitempty"`
	ExtractedText string            `json:"extracted_text,omitempty"`
	ExtractedHTML string            `json:"extracted_html,omitempty"`
	Attachments   []Attachment      `json:"attachments,omitempty"`
	InReplyTo     string            `json:"in_reply_to,omitempty"`
	References    []string          `json:"references,omitempty"`
	Headers       map[string]string `json:"headers,omitempty"`
	Size          int64             `json:"size"`
	UpdatedAt     time.Time         `json:"updated_at,omitzero"`
	CreatedAt     time.Time         `json:"created_at,omitzero"`
}

// SubjectOrDefault returns the subject, or [DefaultSubject] when it is
// empty or blank.
func (m *Message) SubjectOrDefault() string {
	if strings.TrimSpace(m.Subject) == "" {
		return DefaultSubject
	}
	return m.Subject
}

// HasLabel reports whether the message carries label (labels are stored
// lowercase by AgentMail; the comparison ignores case).
func (m *Message) HasLabel(label string) bool {
	for _, l := range m.Labels {
		if strings.EqualFold(l, label) {
			return true
		}
	}
	return false
}

// Header returns the value of the named header, matching the name
// case-insensitively, and whether it was present.
func (m *Message) Header(name string) (string, bool) {
	if v, ok := m.Headers[name]; ok {
		return v, true
	}
	for k, v := range m.Headers {
		if strings.EqualFold(k, name) {
			return v, true
		}
	}
	return "", false
}

// validate enforces the message schema (docs/email-pipeline.md, "The provider client"): inbox_id,
// thread_id, message_id and timestamp are required and attachment sizes are
// not negative. It returns a log-safe detail or "".
func (m *Message) validate() string {
	switch {
	case m.InboxID == "":
		return "missing inbox_id"
	case m.ThreadID == "":
		return "missing thread_id"
	case m.MessageID == "":
		return "missing message_id"
	case m.Timestamp.IsZero():
		return "missing timestamp"
	}
	for _, a := range m.Attachments {
		if a.AttachmentID == "" {
			return "missing attachment_id"
		}
		if a.Size < 0 {
			return "negative attachment size"
		}
	}
	return ""
}

// ThreadItem is a thread summary (thread listings and message.received
// events).
type ThreadItem struct {
	InboxID           string       `json:"inbox_id"`
	ThreadID          string       `json:"thread_id"`
	Labels            []string     `json:"labels"`
	Timestamp         time.Time    `json:"timestamp"`
	ReceivedTimestamp time.Time    `json:"received_timestamp,omitzero"`
	SentTimestamp     time.Time    `json:"sent_timestamp,omitzero"`
	Senders           []string     `json:"senders"`
	Recipients        []string     `json:"recipients"`
	Subject           string       `json:"subject,omitempty"`
	Preview           string       `json:"preview,omitempty"`
	Attachments       []Attachment `json:"attachments,omitempty"`
	LastMessageID     string       `json:"last_message_id"`
	MessageCount      int          `json:"message_count"`
	Size              int64        `json:"size"`
	UpdatedAt         time.Time    `json:"updated_at,omitzero"`
	CreatedAt         time.Time    `json:"created_at,omitzero"`
}

// Thread is a thread with its messages, ordered by timestamp ascending
// (GET /inboxes/{id}/threads/{tid}). Large threads are paginated: a
// non-empty NextPageToken means more messages can be fetched.
type Thread struct {
	ThreadItem
	Count         int       `json:"count"`
	Limit         int       `json:"limit,omitempty"`
	NextPageToken string    `json:"next_page_token,omitempty"`
	Messages      []Message `json:"messages"`
}

// SendAttachment is an attachment of an outgoing message. Content is the
// standard base64 encoding of the bytes. URL makes AgentMail fetch the
// content itself; Paperclip does not use it (SSRF by proxy).
type SendAttachment struct {
	Filename           string `json:"filename,omitempty"`
	ContentType        string `json:"content_type,omitempty"`
	ContentDisposition string `json:"content_disposition,omitempty"`
	ContentID          string `json:"content_id,omitempty"`
	Content            string `json:"content,omitempty"`
	URL                string `json:"url,omitempty"`
}

// SendMessageRequest is the body of POST /inboxes/{id}/messages/send.
// Recipient fields accept several addresses; AgentMail accepts at most 50
// recipients across To, Cc and Bcc.
type SendMessageRequest struct {
	Labels      []string          `json:"labels,omitempty"`
	ReplyTo     []string          `json:"reply_to,omitempty"`
	To          []string          `json:"to,omitempty"`
	Cc          []string          `json:"cc,omitempty"`
	Bcc         []string          `json:"bcc,omitempty"`
	Subject     string            `json:"subject,omitempty"`
	Text        string            `json:"text,omitempty"`
	HTML        string            `json:"html,omitempty"`
	Attachments []SendAttachment  `json:"attachments,omitempty"`
	Headers     map[string]string `json:"headers,omitempty"`
}

// ReplyRequest is the body of POST /inboxes/{id}/messages/{mid}/reply.
// Paperclip computes reply-all recipients itself and always leaves ReplyAll
// false so that Bcc can never be inherited; the field exists for
// completeness.
type ReplyRequest struct {
	Labels      []string          `json:"labels,omitempty"`
	ReplyTo     []string          `json:"reply_to,omitempty"`
	To          []string          `json:"to,omitempty"`
	Cc          []string          `json:"cc,omitempty"`
	Bcc         []string          `json:"bcc,omitempty"`
	ReplyAll    *bool             `json:"reply_all,omitempty"`
	Text        string            `json:"text,omitempty"`
	HTML        string            `json:"html,omitempty"`
	Attachments []SendAttachment  `json:"attachments,omitempty"`
	Headers     map[string]string `json:"headers,omitempty"`
}

// ReplyAllRequest is the body of POST /inboxes/{id}/messages/{mid}/reply-all;
// AgentMail derives every recipient from the original message.
type ReplyAllRequest struct {
	Labels      []string          `json:"labels,omitempty"`
	ReplyTo     []string          `json:"reply_to,omitempty"`
	Text        string            `json:"text,omitempty"`
	HTML        string            `json:"html,omitempty"`
	Attachments []SendAttachment  `json:"attachments,omitempty"`
	Headers     map[string]string `json:"headers,omitempty"`
}

// SendMessageResponse is the result of every send, reply and reply-all.
type SendMessageResponse struct {
	MessageID string `json:"message_id"`
	ThreadID  string `json:"thread_id"`
}

// BounceRecipient is a recipient of a bounced message with its status.
type BounceRecipient struct {
	Address string `json:"address"`
	Status  string `json:"status"`
}
