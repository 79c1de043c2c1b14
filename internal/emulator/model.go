package emulator

import (
	"time"
)

// timeFormat is the wire format of every datetime: RFC 3339 in UTC with
// millisecond precision, e.g. 2026-01-02T15:04:05.000Z.
const timeFormat = "2006-01-02T15:04:05.000Z"

func ts(t time.Time) string { return t.UTC().Format(timeFormat) }

func tsPtr(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	s := ts(t)
	return &s
}

// Internal state types. They are only touched with store.mu held; wire
// representations are built from them under the lock and marshalled after.

type organization struct {
	id        string
	name      string
	podID     string // default pod
	createdAt time.Time
	updatedAt time.Time
}

type pod struct {
	id, orgID, name, clientID string
	seq                       uint64
	createdAt, updatedAt      time.Time
}

type inbox struct {
	id, orgID, podID     string
	displayName          string
	clientID             string
	metadata             map[string]any
	seq                  uint64
	createdAt, updatedAt time.Time
}

type apiKey struct {
	id, secret, prefix, name string
	orgID, podID, inboxID    string
	perms                    map[string]bool // nil: unrestricted
	seq                      uint64
	createdAt, updatedAt     time.Time
	usedAt                   time.Time
}

func (k *apiKey) scopeType() string {
	switch {
	case k.inboxID != "":
		return "inbox"
	case k.podID != "":
		return "pod"
	}
	return "organization"
}

type attachment struct {
	id, filename, contentType, disposition, contentID string
	data                                              []byte
}

type message struct {
	inboxID, threadID, messageID string
	labels                       []string
	timestamp                    time.Time
	createdAt, updatedAt         time.Time
	from                         string
	to, cc, bcc, replyTo         []string
	subject                      string
	text, html                   string
	extractedText, extractedHTML string
	preview                      string
	attachments                  []*attachment
	inReplyTo                    string
	references                   []string
	headers                      map[string]string
	size                         int
	seq                          uint64
	raw                          []byte
	sent                         bool
}

func (m *message) hasLabel(l string) bool {
	for _, x := range m.labels {
		if x == l {
			return true
		}
	}
	return false
}

type thread struct {
	id, inboxID string
	messages    []*message // in arrival order
	seq         uint64
	createdAt   time.Time
}

type webhook struct {
	id, orgID, url, secret, clientID string
	eventTypes                       []string
	podIDs, inboxIDs                 []string
	headers                          map[string]string
	enabled                          bool
	scopePodID, scopeInboxID         string // set when created on a scoped path
	seq                              uint64
	createdAt, updatedAt             time.Time
}

type domain struct {
	name, orgID, podID, clientID string
	status                       string
	feedbackEnabled              bool
	subdomainsEnabled            bool
	trackingEnabled              bool
	seq                          uint64
	createdAt, updatedAt         time.Time
}

// Wire types, field for field as in the official SDK serialization schemas
// (agentmail@0.5.27, dist/cjs/serialization).

type wireInbox struct {
	PodID       string         `json:"pod_id"`
	InboxID     string         `json:"inbox_id"`
	Email       string         `json:"email"`
	DisplayName string         `json:"display_name,omitempty"`
	ClientID    string         `json:"client_id,omitempty"`
	Metadata    map[string]any `json:"metadata,omitempty"`
	UpdatedAt   string         `json:"updated_at"`
	CreatedAt   string         `json:"created_at"`
}

type wireAttachment struct {
	AttachmentID       string `json:"attachment_id"`
	Filename           string `json:"filename,omitempty"`
	Size               int    `json:"size"`
	ContentType        string `json:"content_type,omitempty"`
	ContentDisposition string `json:"content_disposition,omitempty"`
	ContentID          string `json:"content_id,omitempty"`
}

type wireAttachmentResponse struct {
	wireAttachment
	DownloadURL string `json:"download_url"`
	ExpiresAt   string `json:"expires_at"`
}

// wireMessage serves both MessageItem (full=false: no bodies, no reply_to)
// and Message.
type wireMessage struct {
	InboxID       string            `json:"inbox_id"`
	ThreadID      string            `json:"thread_id"`
	MessageID     string            `json:"message_id"`
	Labels        []string          `json:"labels"`
	Timestamp     string            `json:"timestamp"`
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
	Attachments   []wireAttachment  `json:"attachments,omitempty"`
	InReplyTo     string            `json:"in_reply_to,omitempty"`
	References    []string          `json:"references,omitempty"`
	Headers       map[string]string `json:"headers,omitempty"`
	Size          int               `json:"size"`
	UpdatedAt     string            `json:"updated_at"`
	CreatedAt     string            `json:"created_at"`
}

type wireThreadItem struct {
	InboxID           string           `json:"inbox_id"`
	ThreadID          string           `json:"thread_id"`
	Labels            []string         `json:"labels"`
	Timestamp         string           `json:"timestamp"`
	ReceivedTimestamp *string          `json:"received_timestamp,omitempty"`
	SentTimestamp     *string          `json:"sent_timestamp,omitempty"`
	Senders           []string         `json:"senders"`
	Recipients        []string         `json:"recipients"`
	Subject           string           `json:"subject,omitempty"`
	Preview           string           `json:"preview,omitempty"`
	Attachments       []wireAttachment `json:"attachments,omitempty"`
	LastMessageID     string           `json:"last_message_id"`
	MessageCount      int              `json:"message_count"`
	Size              int              `json:"size"`
	UpdatedAt         string           `json:"updated_at"`
	CreatedAt         string           `json:"created_at"`
}

type wireThread struct {
	wireThreadItem
	Count         int           `json:"count"`
	Limit         int           `json:"limit,omitempty"`
	NextPageToken string        `json:"next_page_token,omitempty"`
	Messages      []wireMessage `json:"messages"`
}

type wireBearerKey struct {
	Type        string          `json:"type"`
	APIKeyID    string          `json:"api_key_id"`
	Prefix      string          `json:"prefix"`
	Name        string          `json:"name"`
	PodID       string          `json:"pod_id,omitempty"`
	InboxID     string          `json:"inbox_id,omitempty"`
	UsedAt      *string         `json:"used_at,omitempty"`
	Permissions map[string]bool `json:"permissions,omitempty"`
	CreatedAt   string          `json:"created_at"`
	UpdatedAt   string          `json:"updated_at"`
}

type wireCreateKeyResponse struct {
	APIKeyID    string          `json:"api_key_id"`
	APIKey      string          `json:"api_key"`
	Prefix      string          `json:"prefix"`
	Name        string          `json:"name"`
	PodID       string          `json:"pod_id,omitempty"`
	InboxID     string          `json:"inbox_id,omitempty"`
	Permissions map[string]bool `json:"permissions,omitempty"`
	CreatedAt   string          `json:"created_at"`
}

type wireWebhook struct {
	WebhookID  string   `json:"webhook_id"`
	URL        string   `json:"url"`
	EventTypes []string `json:"event_types,omitempty"`
	PodIDs     []string `json:"pod_ids,omitempty"`
	InboxIDs   []string `json:"inbox_ids,omitempty"`
	Secret     string   `json:"secret"`
	Enabled    bool     `json:"enabled"`
	UpdatedAt  string   `json:"updated_at"`
	CreatedAt  string   `json:"created_at"`
	ClientID   string   `json:"client_id,omitempty"`
}

type wireRecord struct {
	Type     string `json:"type"`
	Name     string `json:"name"`
	Value    string `json:"value"`
	Status   string `json:"status"`
	Priority *int   `json:"priority,omitempty"`
}

// wireDomainItem is a list element: a Domain without status and records.
type wireDomainItem struct {
	PodID             string `json:"pod_id,omitempty"`
	DomainID          string `json:"domain_id"`
	Domain            string `json:"domain"`
	FeedbackEnabled   bool   `json:"feedback_enabled"`
	SubdomainsEnabled bool   `json:"subdomains_enabled"`
	TrackingEnabled   bool   `json:"tracking_enabled"`
	ClientID          string `json:"client_id,omitempty"`
	UpdatedAt         string `json:"updated_at"`
	CreatedAt         string `json:"created_at"`
}

// wireDomain is the full Domain object with verification status and records.
type wireDomain struct {
	PodID             string       `json:"pod_id,omitempty"`
	DomainID          string       `json:"domain_id"`
	Domain            string       `json:"domain"`
	Status            string       `json:"status"`
	FeedbackEnabled   bool         `json:"feedback_enabled"`
	SubdomainsEnabled bool         `json:"subdomains_enabled"`
	TrackingEnabled   bool         `json:"tracking_enabled"`
	Records           []wireRecord `json:"records"`
	ClientID          string       `json:"client_id,omitempty"`
	UpdatedAt         string       `json:"updated_at"`
	CreatedAt         string       `json:"created_at"`
}

type wirePod struct {
	PodID     string `json:"pod_id"`
	Name      string `json:"name"`
	UpdatedAt string `json:"updated_at"`
	CreatedAt string `json:"created_at"`
	ClientID  string `json:"client_id,omitempty"`
}

type wireSendResponse struct {
	MessageID string `json:"message_id"`
	ThreadID  string `json:"thread_id"`
}
