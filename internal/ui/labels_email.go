package ui

// The email pages' labels and fixed copy (docs/ui.md, "Pages"). Tests and
// templates use these constants; the typographic apostrophe ’ is part of
// the copy.

// Inbox status badge keys (data-status) and labels.
const (
	inboxKeyReceiving = "receiving"
	inboxKeyAttention = "attention"
	inboxKeyPaused    = "paused"
	inboxKeyDraft     = "draft"
	inboxKeyArchived  = "archived"
)

var inboxBadgeLabels = map[string]string{
	inboxKeyReceiving: "Receiving email",
	inboxKeyAttention: "Needs attention",
	inboxKeyPaused:    "Paused",
	inboxKeyDraft:     "Setup incomplete",
	inboxKeyArchived:  "Disconnected",
}

var inboxBadgeTones = map[string]string{
	inboxKeyReceiving: "green", inboxKeyAttention: "red", inboxKeyPaused: "amber", inboxKeyDraft: "amber", inboxKeyArchived: "gray",
}

// Sentences under "Receiving email" ({Agent} is replaced).
const (
	msgInboxReceiving    = "Send an email to this address to start a task with {Agent}."
	msgInboxPaused       = "Receiving is paused. Resume to receive new email."
	msgInboxDraftNoAddr  = "Connection setup is incomplete."
	msgInboxDraftAddr    = "This address was created in AgentMail. Finish connecting it to {Agent}."
	msgInboxArchived     = "Inbox disconnected. Email history remains in its tasks."
	msgCleanupFailed     = "Disconnected locally. Provider registrations could not be removed; remove Paperclip’s webhook and runtime key in AgentMail."
	msgNotCheckedYet     = "Not checked yet"
	msgStandardAgentWarn = "{Agent} is not a low-trust agent."
)

// Receive modes: short labels, the review step's label and the radio text.
var receiveLabels = map[string]string{"websocket": "Live connection", "webhook": "Webhook"}

var receiveReviewLabels = map[string]string{"websocket": "Live connection", "webhook": "Signed webhook"}

const (
	msgReceiveWebsocketLong = "Live connection (recommended) — Works locally. No public URL needed."
	msgReceiveWebhookLong   = "Webhook — For a Paperclip server with a public HTTPS address."
	msgWebhookNeedsHTTPS    = "Webhook receiving requires a public HTTPS URL; use WebSocket for local setup."
)

// Send outcome labels are the task email view's (taskEmailOutcomeLabels
// in labels_task_email.go); the inbox activity reuses them.

// deliveryStateLabels are the inbound delivery states (inbox activity).
var deliveryStateLabels = map[string]string{
	"received": "Received", "processing": "Processing", "processed": "Processed", "filtered": "Ignored", "retry": "Retrying",
}

// eventKindLabels name provider events.
var eventKindLabels = map[string]string{
	"message.received": "Email received", "message.sent": "Email sent", "message.delivered": "Delivered receipt",
	"message.bounced": "Bounce receipt", "message.complained": "Complaint receipt", "message.rejected": "Rejection receipt",
}

// scopeLabels name a saved credential's scope.
var scopeLabels = map[string]string{
	"organization": "Organization key", "pod": "Pod key", "inbox": "Inbox key", "unavailable": "Key unavailable",
}

// Human and agent access of a saved credential.
const (
	msgGrantOrganization = "Any human in the organization"
	msgGrantJustMe       = "Just me"
	msgGrantRevoked      = "Access revoked"
	msgAgentsAny         = "Any agent"
	msgAgentsNone        = "No agents selected"
)

// conversationStateLabels are an email conversation's states.
var conversationStateLabels = map[string]string{"waiting": "Waiting for a reply", "active": "Active"}

// Fixed copy of the email pages.
const (
	msgEmailDisabled     = "Email connections are experimental and turned off."
	msgEmailDisabledAsk  = "Ask an instance administrator to turn them on."
	msgOnlyManagersConns = "Only connection managers can see and change AgentMail connections."
	msgNoConnections     = "No AgentMail connection yet. Connect once, then assign email addresses to your agents."
	msgNoInboxes         = "No email addresses yet."
	msgCreateAgentFirst  = "Create an agent first."
	msgEnterAPIKey       = "Enter an API key to continue."
	// msgReconnectNothing: Reconnect with no new key and the same mode.
	msgReconnectNothing    = "Enter a new API key or choose a different receiving mode."
	msgNoCredentialAccess  = "You don’t have access to this AgentMail credential."
	msgConnReady           = "Your connection is ready. Give an agent an inbox."
	msgConnReadyAnother    = "Give another agent an inbox"
	msgNotVerified         = "Not verified by Paperclip"
	msgStopsFor            = "This stops receiving and sending for {address} at once. Continue?"
	msgOwnKeyAccess        = "This inbox uses its own API key. Replace it with Reconnect inbox."
	msgOnlyManagersAccess  = "Only connection managers can see connection access."
	msgCantLoadAccess      = "Couldn’t load connection access."
	msgNoConversations     = "No email conversations yet."
	msgCantLoadConvs       = "Couldn’t load the conversations."
	msgNoActivity          = "No activity yet."
	msgReceivingUnchanged  = "Receiving was not changed."
	msgSetupRunning        = "Setup is already running for this address. Wait a moment, then reload this page."
	msgAddressTaken        = "This email address is already in use. Choose a different address."
	msgAddressUnknown      = "AgentMail confirms availability when you create the address."
	msgAddressChecking     = "Checking address…"
	msgUsernameRule        = "Use letters, digits, dots, hyphens or underscores, starting with a letter or digit (at most 64)."
	msgInboxAssigned       = "This inbox is already assigned to an agent."
	msgNeedsBoundaryEmail  = "This agent needs a work boundary before it can receive email."
	msgPasteKeyAgain       = "Paste the API key again."
	msgRestrictedInbox     = "That key only connects {inbox}. Choose a saved account key or enter one to create a new address."
	msgSelectAgent         = "Select an available company agent"
	msgSlowSetup           = "Still working — AgentMail can take up to 30 seconds per step. You can leave this page; the setup can be finished later from AgentMail."
	msgSlowProvider        = "Still working — AgentMail can take up to 30 seconds per step."
	msgFinishSetupCopy     = "This address was created in AgentMail. Finish connecting it to {Agent}, or choose a different address. The original inbox will stay in AgentMail."
	msgFinishSetupCopyOnly = "This address was created in AgentMail. Finish connecting it to {Agent}."
	msgAlreadyConnected    = "This inbox is already connected."
	msgDomainNotOffered    = "Choose one of the offered domains."
	msgChooseInbox         = "Choose an available inbox."

	flashEmailEnabled    = "Email connections turned on."
	flashDiscarded       = "Unfinished setup discarded. An inbox already created stays in AgentMail."
	flashInboxPaused     = "Inbox paused."
	flashInboxResumed    = "Inbox resumed."
	flashReconnected     = "Inbox reconnected."
	flashDisconnected    = "Inbox disconnected. Email history remains in its tasks."
	flashAccessSaved     = "Connection access saved."
	flashGrantRevoked    = "Access revoked."
	flashInstallRemoved  = "Agent access removed."
	flashConnectionSaved = "AgentMail is connected."
)
