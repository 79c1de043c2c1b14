package domain

import (
	"encoding/json"
	"time"
)

// Email endpoint statuses.
const (
	EndpointDraft    = "draft"
	EndpointActive   = "active"
	EndpointPaused   = "paused"
	EndpointArchived = "archived"
)

// Receive modes.
const (
	ReceiveWebSocket = "websocket"
	ReceiveWebhook   = "webhook"
)

// EmailConnection is a saved AgentMail account credential: a vaulted key
// plus the humans (grants) and agents (installs) allowed to use it.
type EmailConnection struct {
	ID                string    `json:"id"`
	CompanyID         string    `json:"companyId"`
	IdempotencyKey    string    `json:"-"`
	Name              string    `json:"name"`
	Provider          string    `json:"provider"`
	Scope             string    `json:"scope"`
	InboxID           string    `json:"inboxId,omitempty"`
	OrganizationID    string    `json:"-"`
	Status            string    `json:"status"`
	InitialInstallIDs []string  `json:"-"`
	CreatedByUserID   string    `json:"createdByUserId,omitempty"`
	CreatedAt         time.Time `json:"createdAt"`
	UpdatedAt         time.Time `json:"updatedAt"`
	// Grants and Installs are filled by callers that present the connection.
	Grants   []EmailGrant   `json:"grants,omitempty"`
	Installs []EmailInstall `json:"installs,omitempty"`
}

// Grant kinds and statuses.
const (
	GrantOrganization = "organization" // every board user of the company
	GrantUser         = "user"         // one board user
	GrantActive       = "active"
	GrantRevoked      = "revoked"
)

// GrantsAllow reports whether an active grant lets userID use a saved
// credential: an organization grant, or a user grant to userID. (The local
// board's exception stays with the caller.)
func GrantsAllow(grants []EmailGrant, userID string) bool {
	for _, g := range grants {
		if g.Status == GrantActive && (g.Kind == GrantOrganization || (g.Kind == GrantUser && userID != "" && g.SubjectUserID == userID)) {
			return true
		}
	}
	return false
}

// AnyGrantActive reports whether a saved credential still has an active
// grant; without one it is unusable by anybody.
func AnyGrantActive(grants []EmailGrant) bool {
	for _, g := range grants {
		if g.Status == GrantActive {
			return true
		}
	}
	return false
}

// EmailGrant gives humans access to a saved credential.
type EmailGrant struct {
	ID            string     `json:"id"`
	ConnectionID  string     `json:"connectionId"`
	Kind          string     `json:"kind"`
	SubjectUserID string     `json:"subjectUserId,omitempty"`
	Status        string     `json:"status"`
	CreatedAt     time.Time  `json:"createdAt"`
	RevokedAt     *time.Time `json:"revokedAt,omitempty"`
}

// EmailInstall gives an agent (or every agent of the company) access to a
// saved credential.
type EmailInstall struct {
	ID           string    `json:"id"`
	ConnectionID string    `json:"connectionId"`
	TargetType   string    `json:"targetType"`
	TargetID     string    `json:"targetId"`
	CreatedAt    time.Time `json:"createdAt"`
}

// EmailEndpoint is one connected inbox: one inbox, one assigned agent.
type EmailEndpoint struct {
	ID                     string
	CompanyID              string
	PublicID               string
	AssignedAgentID        string
	SponsorUserID          string
	CredentialConnectionID string
	Status                 string
	Address                string
	DisplayName            string
	ProviderAccountID      string
	ReceiveMode            string
	WebhookID              string
	OwnedAPIKeyID          string
	ActivationAt           *time.Time
	SyncCheckpoint         *time.Time
	LastSyncAt             *time.Time
	HealthMessage          string
	LastError              string
	LastEventAt            *time.Time
	LastPublicationAt      *time.Time
	ActivatedAt            *time.Time
	ArchivedAt             *time.Time
	CreatedAt              time.Time
	UpdatedAt              time.Time
}

// EmailEndpointSummary is the API shape of an endpoint.
type EmailEndpointSummary struct {
	ID              string     `json:"id"`
	CompanyID       string     `json:"companyId"`
	ConnectionID    string     `json:"connectionId"`
	AssignedAgentID string     `json:"assignedAgentId"`
	Address         *string    `json:"address"`
	Status          string     `json:"status"`
	ReceiveMode     string     `json:"receiveMode"`
	LastError       *string    `json:"lastError"`
	LastSyncAt      *time.Time `json:"lastSyncAt"`
	HealthMessage   string     `json:"healthMessage,omitempty"`
	ActivatedAt     *time.Time `json:"activatedAt,omitempty"`
	// CredentialConnectionID is the saved credential the inbox was set up
	// from (null for an inbox using its own pasted key, and after a
	// reconnect, which always gives the inbox its own key).
	CredentialConnectionID *string    `json:"credentialConnectionId"`
	CreatedAt              time.Time  `json:"createdAt"`
	ActivationAt           *time.Time `json:"activationAt"`
	LastEventAt            *time.Time `json:"lastEventAt"`
	LastPublicationAt      *time.Time `json:"lastPublicationAt"`
	ArchivedAt             *time.Time `json:"archivedAt"`
	// LowTrustWarning is true when the assigned agent is not low-trust: an
	// unrestricted inbox can receive mail from anyone.
	StandardAgentWarning bool `json:"standardAgentWarning,omitempty"`
	// Health, HealthCode, HealthMessage, LastError and LastErrorAt are the
	// inbox's health as of this read, computed from its state, its
	// credentials, what the receiving side observed and its agent's runs
	// (docs/api.md, "Inbox health"). SocketOwner names the replica holding
	// the live connection (null when none, and for webhook inboxes).
	Health      string     `json:"health"`
	HealthCode  string     `json:"healthCode"`
	LastErrorAt *time.Time `json:"lastErrorAt"`
	SocketOwner *string    `json:"socketOwner"`
}

// Inbox health categories (EmailEndpointSummary.Health).
const (
	HealthOK              = "ok"               // receiving and sending
	HealthConnecting      = "connecting"       // active; the live connection is not up yet
	HealthAttention       = "attention"        // active, but something fails: see the message
	HealthPaused          = "paused"           // paused by a board user
	HealthSetupIncomplete = "setup_incomplete" // a draft: setup has not finished
	HealthDisconnected    = "disconnected"     // archived
)

// Summary returns the endpoint's API shape.
func (e EmailEndpoint) Summary() EmailEndpointSummary {
	s := EmailEndpointSummary{ID: e.ID, CompanyID: e.CompanyID, ConnectionID: e.ID, AssignedAgentID: e.AssignedAgentID,
		Status: e.Status, ReceiveMode: e.ReceiveMode, LastSyncAt: e.LastSyncAt, HealthMessage: e.HealthMessage,
		ActivatedAt: e.ActivatedAt, CreatedAt: e.CreatedAt, ActivationAt: e.ActivationAt, LastEventAt: e.LastEventAt,
		LastPublicationAt: e.LastPublicationAt, ArchivedAt: e.ArchivedAt}
	if e.CredentialConnectionID != "" {
		c := e.CredentialConnectionID
		s.CredentialConnectionID = &c
	}
	if e.Address != "" {
		a := e.Address
		s.Address = &a
	}
	if e.LastError != "" {
		l := e.LastError
		s.LastError = &l
	}
	return s
}

// EmailConversation binds one provider thread of an endpoint to one task.
type EmailConversation struct {
	ID                     string    `json:"id"`
	CompanyID              string    `json:"companyId"`
	EndpointID             string    `json:"endpointId"`
	IssueID                string    `json:"issueId"`
	ExternalConversationID string    `json:"externalConversationId"`
	ExternalThreadID       string    `json:"externalThreadId"`
	Subject                string    `json:"subject"`
	State                  string    `json:"state"`
	LastActivityAt         time.Time `json:"lastActivityAt"`
	CreatedAt              time.Time `json:"createdAt"`
}

// EmailEnvelope is the addressing of a retained message (Bcc included).
type EmailEnvelope struct {
	From    string   `json:"from"`
	To      []string `json:"to"`
	Cc      []string `json:"cc,omitempty"`
	Bcc     []string `json:"bcc,omitempty"`
	ReplyTo []string `json:"replyTo,omitempty"`
	Subject string   `json:"subject"`
}

// EmailMessage is a retained email of either direction.
type EmailMessage struct {
	ID                string          `json:"id"`
	CompanyID         string          `json:"companyId"`
	EndpointID        string          `json:"endpointId"`
	ConversationID    string          `json:"conversationId"`
	ProviderMessageID string          `json:"providerMessageId"`
	ProviderThreadID  string          `json:"providerThreadId"`
	Envelope          EmailEnvelope   `json:"envelope"`
	Headers           json.RawMessage `json:"headers,omitempty"`
	Text              string          `json:"text"`
	FullText          string          `json:"fullText"`
	Direction         string          `json:"direction"`
	Automatic         bool            `json:"automatic"`
	AttachmentIDs     []string        `json:"attachmentIds"`
	CommentID         string          `json:"commentId,omitempty"`
	Timestamp         time.Time       `json:"timestamp"`
	CreatedAt         time.Time       `json:"createdAt"`
}

// DeliveryState is the state of an inbound delivery (an admitted provider
// event), described in docs/email-pipeline.md, "Deliveries: states and
// retries".
type DeliveryState string

// Delivery states.
const (
	DeliveryReceived   DeliveryState = "received"   // admitted, not processed yet
	DeliveryProcessing DeliveryState = "processing" // mail retained, wake pending
	DeliveryProcessed  DeliveryState = "processed"  // finished
	DeliveryFiltered   DeliveryState = "filtered"   // finished with no task and no wake
	DeliveryRetry      DeliveryState = "retry"      // waiting for its next attempt
)

// SendState is the send worker's state of a send (email_publications.state),
// described in docs/email-pipeline.md, "Sends: states and outcomes".
type SendState string

// Send states.
const (
	SendPending   SendState = "pending"          // accepted, no attempt yet
	SendStreaming SendState = "streaming"        // an attempt is being made
	SendRetry     SendState = "retry"            // waiting for its next attempt or check
	SendPublished SendState = "published"        // the provider accepted it
	SendFailed    SendState = "failed"           // never to be attempted again
	SendUnknown   SendState = "delivery_unknown" // past the confirmation window
)

// SendOutcome is the user-facing outcome of a send (email_sends.outcome).
type SendOutcome string

// Send outcomes.
const (
	OutcomeQueued    SendOutcome = "queued"
	OutcomeSent      SendOutcome = "sent"
	OutcomeDelivered SendOutcome = "delivered"
	OutcomeFailed    SendOutcome = "failed"
	OutcomeUncertain SendOutcome = "uncertain"
	// OutcomeAwaitingReview: held by the inbox's send policy until a
	// person approves or rejects it (or its review expires); no provider
	// call has been made.
	OutcomeAwaitingReview SendOutcome = "awaiting_review"
	// OutcomeRejected: a reviewer refused the held send (final).
	OutcomeRejected SendOutcome = "rejected"
	// OutcomeExpired: nobody reviewed the held send in time (final).
	OutcomeExpired SendOutcome = "expired"
)
