package agentmail

import (
	"net/http"
	"strings"
)

// Fixed operation names (docs/email-pipeline.md, "The provider client"). They are the only operation values
// that appear in errors and logs.
const (
	OpInspectKey     = "inspect_key"
	OpListInboxes    = "list_inboxes"
	OpCreateInbox    = "create_inbox"
	OpGetInbox       = "get_inbox"
	OpListDomains    = "list_domains"
	OpGetDomain      = "get_domain"
	OpCreateInboxKey = "create_inbox_key"
	OpDeleteInboxKey = "delete_inbox_key"
	OpCreateWebhook  = "create_webhook"
	OpDeleteWebhook  = "delete_webhook"
	OpListMessages   = "list_messages"
	OpGetMessage     = "get_message"
	OpGetThread      = "get_thread"
	OpSendMessage    = "send_message"
	OpReplyMessage   = "reply_message"
	OpGetAttachment  = "get_attachment"
	// The inbox-scoped allow/block lists (sender rules).
	OpListListEntries = "list_list_entries"
	OpCreateListEntry = "create_list_entry"
	OpDeleteListEntry = "delete_list_entry"

	// OpRequest names every REST request that matches none of the fixed
	// patterns (for example listing webhooks, reply-all or a PATCH).
	OpRequest = "request"

	// OpWebSocket names the WebSocket handshake and subscription; it is not
	// a REST operation and never comes out of [OperationFor].
	OpWebSocket = "websocket"
	// OpDownloadAttachment names the fetch of an attachment's pre-signed
	// download URL, which is a storage request rather than an AgentMail API
	// request and never comes out of [OperationFor].
	OpDownloadAttachment = "download_attachment"
)

// operationPattern matches a method and a path split into segments; "*"
// matches exactly one non-empty segment.
type operationPattern struct {
	method   string
	segments []string
	name     string
}

var operationPatterns = []operationPattern{
	{http.MethodGet, []string{"auth", "me"}, OpInspectKey},
	{http.MethodGet, []string{"inboxes"}, OpListInboxes},
	{http.MethodPost, []string{"inboxes"}, OpCreateInbox},
	{http.MethodGet, []string{"inboxes", "*"}, OpGetInbox},
	{http.MethodGet, []string{"domains"}, OpListDomains},
	{http.MethodGet, []string{"domains", "*"}, OpGetDomain},
	{http.MethodPost, []string{"inboxes", "*", "api-keys"}, OpCreateInboxKey},
	{http.MethodDelete, []string{"inboxes", "*", "api-keys", "*"}, OpDeleteInboxKey},
	{http.MethodPost, []string{"inboxes", "*", "webhooks"}, OpCreateWebhook},
	{http.MethodDelete, []string{"inboxes", "*", "webhooks", "*"}, OpDeleteWebhook},
	{http.MethodGet, []string{"inboxes", "*", "messages"}, OpListMessages},
	{http.MethodGet, []string{"inboxes", "*", "messages", "*"}, OpGetMessage},
	{http.MethodGet, []string{"inboxes", "*", "threads", "*"}, OpGetThread},
	{http.MethodPost, []string{"inboxes", "*", "messages", "send"}, OpSendMessage},
	{http.MethodPost, []string{"inboxes", "*", "messages", "*", "reply"}, OpReplyMessage},
	{http.MethodGet, []string{"inboxes", "*", "messages", "*", "attachments", "*"}, OpGetAttachment},
	{http.MethodGet, []string{"inboxes", "*", "lists", "*", "*"}, OpListListEntries},
	{http.MethodPost, []string{"inboxes", "*", "lists", "*", "*"}, OpCreateListEntry},
	{http.MethodDelete, []string{"inboxes", "*", "lists", "*", "*", "*"}, OpDeleteListEntry},
}

// OperationFor returns the fixed operation name of a REST request, given its
// method and its escaped path relative to the API base URL (for example
// "/inboxes/agent%40agentmail.to/messages"). Any query string is ignored.
// Requests that match none of the 19 fixed patterns are [OpRequest].
func OperationFor(method, path string) string {
	if i := strings.IndexAny(path, "?#"); i >= 0 {
		path = path[:i]
	}
	path = strings.TrimPrefix(path, "/")
	segs := strings.Split(path, "/")
	method = strings.ToUpper(method)
	for _, p := range operationPatterns {
		if p.method == method && matchSegments(p.segments, segs) {
			return p.name
		}
	}
	return OpRequest
}

func matchSegments(pattern, segs []string) bool {
	if len(pattern) != len(segs) {
		return false
	}
	for i, p := range pattern {
		if p == "*" {
			if segs[i] == "" {
				return false
			}
			continue
		}
		if segs[i] != p {
			return false
		}
	}
	return true
}
