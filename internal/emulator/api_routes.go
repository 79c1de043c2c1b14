package emulator

// apiRoutes is the provider route table. Literal segments come before
// parameter segments at the same position (e.g. messages/send before
// messages/{message_id}) because the first match wins.
func (s *Server) apiRoutes() []*route {
	r := func(method, path, op, perm string, h handler) *route {
		return &route{method: method, pattern: splitPattern(path), op: op, perm: perm, h: h}
	}
	routes := []*route{
		r("GET", "auth/me", "inspect_key", "", (*call).authMe),
		r("GET", "organizations", "", "", (*call).getOrganization),

		r("GET", "inboxes", "list_inboxes", "inbox_read", (*call).listInboxes),
		r("GET", "inboxes/search", "", "inbox_read", (*call).searchInboxes),
		r("POST", "inboxes", "create_inbox", "inbox_create", (*call).createInbox),
		r("GET", "inboxes/{inbox_id}", "get_inbox", "inbox_read", (*call).getInbox),
		r("PATCH", "inboxes/{inbox_id}", "", "inbox_update", (*call).updateInbox),
		r("DELETE", "inboxes/{inbox_id}", "", "inbox_delete", (*call).deleteInbox),

		r("GET", "inboxes/{inbox_id}/messages", "list_messages", "message_read", (*call).listMessages),
		r("GET", "inboxes/{inbox_id}/messages/search", "", "message_read", (*call).searchMessages),
		r("POST", "inboxes/{inbox_id}/messages/send", "send_message", "message_send", (*call).handleSend),
		r("POST", "inboxes/{inbox_id}/messages/batch-get", "", "message_read", (*call).batchGetMessages),
		r("POST", "inboxes/{inbox_id}/messages/batch-update", "", "message_update", (*call).batchUpdateMessages),
		r("GET", "inboxes/{inbox_id}/messages/{message_id}", "get_message", "message_read", (*call).getMessage),
		r("PATCH", "inboxes/{inbox_id}/messages/{message_id}", "", "message_update", (*call).updateMessage),
		r("DELETE", "inboxes/{inbox_id}/messages/{message_id}", "", "message_delete", (*call).deleteMessage),
		r("GET", "inboxes/{inbox_id}/messages/{message_id}/raw", "", "message_read", (*call).getRawMessage),
		r("GET", "inboxes/{inbox_id}/messages/{message_id}/attachments/{attachment_id}", "get_attachment", "message_read", (*call).getMessageAttachment),
		r("POST", "inboxes/{inbox_id}/messages/{message_id}/reply", "reply_message", "message_send", (*call).handleReply),
		r("POST", "inboxes/{inbox_id}/messages/{message_id}/reply-all", "", "message_send", (*call).handleReplyAll),
		r("POST", "inboxes/{inbox_id}/messages/{message_id}/forward", "", "message_send", (*call).handleForward),

		r("GET", "inboxes/{inbox_id}/api-keys", "", "api_key_read", (*call).listKeys),
		r("POST", "inboxes/{inbox_id}/api-keys", "create_inbox_key", "api_key_create", (*call).createKey),
		r("PATCH", "inboxes/{inbox_id}/api-keys/{api_key_id}", "", "api_key_update", (*call).updateKey),
		r("DELETE", "inboxes/{inbox_id}/api-keys/{api_key_id}", "delete_inbox_key", "api_key_delete", (*call).deleteKey),

		r("POST", "inboxes/{inbox_id}/webhooks", "create_webhook", "webhook_create", (*call).createWebhook),
		r("DELETE", "inboxes/{inbox_id}/webhooks/{webhook_id}", "delete_webhook", "webhook_delete", (*call).deleteWebhook),

		r("GET", "api-keys", "", "api_key_read", (*call).listKeys),
		r("POST", "api-keys", "", "api_key_create", (*call).createKey),
		r("GET", "api-keys/{api_key_id}", "", "api_key_read", (*call).getKey),
		r("PATCH", "api-keys/{api_key_id}", "", "api_key_update", (*call).updateKey),
		r("DELETE", "api-keys/{api_key_id}", "", "api_key_delete", (*call).deleteKey),

		r("GET", "domains", "list_domains", "domain_read", (*call).listDomains),
		r("POST", "domains", "", "domain_create", (*call).createDomain),
		r("GET", "domains/{domain_id}", "get_domain", "domain_read", (*call).getDomain),
		r("PATCH", "domains/{domain_id}", "", "domain_update", (*call).updateDomain),
		r("DELETE", "domains/{domain_id}", "", "domain_delete", (*call).deleteDomain),
		r("POST", "domains/{domain_id}/verify", "", "domain_update", (*call).verifyDomain),
		r("GET", "domains/{domain_id}/zone-file", "", "domain_read", (*call).zoneFile),

		r("GET", "pods", "", "pod_read", (*call).listPods),
		r("POST", "pods", "", "pod_create", (*call).createPod),
		r("GET", "pods/{pod_id}", "", "pod_read", (*call).getPod),
		r("DELETE", "pods/{pod_id}", "", "pod_delete", (*call).deletePod),
	}

	// Thread routes exist org-wide, per inbox and per pod.
	for _, prefix := range []string{"", "inboxes/{inbox_id}/", "pods/{pod_id}/"} {
		getThreadOp := ""
		if prefix == "inboxes/{inbox_id}/" {
			getThreadOp = "get_thread"
		}
		routes = append(routes,
			r("GET", prefix+"threads", "", "message_read", (*call).listThreads),
			r("GET", prefix+"threads/search", "", "message_read", (*call).searchThreads),
			r("GET", prefix+"threads/{thread_id}", getThreadOp, "message_read", (*call).getThread),
			r("PATCH", prefix+"threads/{thread_id}", "", "message_update", (*call).updateThread),
			r("DELETE", prefix+"threads/{thread_id}", "", "message_delete", (*call).deleteThread),
			r("GET", prefix+"threads/{thread_id}/attachments/{attachment_id}", "", "message_read", (*call).getThreadAttachment),
		)
	}
	// Webhook routes exist org-wide, per inbox and per pod (the inbox
	// create/delete routes above carry their fixed operation names).
	for _, prefix := range []string{"", "inboxes/{inbox_id}/", "pods/{pod_id}/"} {
		routes = append(routes,
			r("GET", prefix+"webhooks", "", "webhook_read", (*call).listWebhooks),
			r("POST", prefix+"webhooks", "", "webhook_create", (*call).createWebhook),
			r("GET", prefix+"webhooks/{webhook_id}", "", "webhook_read", (*call).getWebhook),
			r("PATCH", prefix+"webhooks/{webhook_id}", "", "webhook_update", (*call).updateWebhook),
			r("DELETE", prefix+"webhooks/{webhook_id}", "", "webhook_delete", (*call).deleteWebhook),
			r("GET", prefix+"webhooks/{webhook_id}/headers", "", "webhook_read", (*call).getWebhookHeaders),
			r("PATCH", prefix+"webhooks/{webhook_id}/headers", "", "webhook_update", (*call).updateWebhookHeaders),
		)
	}
	// Allow/block list routes exist org-wide, per pod and per inbox.
	// The inbox variants carry the client's fixed operation names.
	for _, prefix := range []string{"", "inboxes/{inbox_id}/", "pods/{pod_id}/"} {
		listOp, createOp, deleteOp := "", "", ""
		if prefix == "inboxes/{inbox_id}/" {
			listOp, createOp, deleteOp = "list_list_entries", "create_list_entry", "delete_list_entry"
		}
		routes = append(routes,
			r("GET", prefix+"lists/{direction}/{type}", listOp, "list_entry_read", (*call).listEntries),
			r("POST", prefix+"lists/{direction}/{type}", createOp, "list_entry_create", (*call).createListEntry),
			r("GET", prefix+"lists/{direction}/{type}/{entry}", "", "list_entry_read", (*call).getListEntry),
			r("DELETE", prefix+"lists/{direction}/{type}/{entry}", deleteOp, "list_entry_delete", (*call).deleteListEntry),
		)
	}
	// Pod-scoped variants of inboxes, keys and domains.
	routes = append(routes,
		r("GET", "pods/{pod_id}/inboxes", "", "inbox_read", (*call).listInboxes),
		r("GET", "pods/{pod_id}/inboxes/search", "", "inbox_read", (*call).searchInboxes),
		r("POST", "pods/{pod_id}/inboxes", "", "inbox_create", (*call).createInbox),
		r("GET", "pods/{pod_id}/inboxes/{inbox_id}", "", "inbox_read", (*call).getInbox),
		r("PATCH", "pods/{pod_id}/inboxes/{inbox_id}", "", "inbox_update", (*call).updateInbox),
		r("DELETE", "pods/{pod_id}/inboxes/{inbox_id}", "", "inbox_delete", (*call).deleteInbox),
		r("GET", "pods/{pod_id}/api-keys", "", "api_key_read", (*call).listKeys),
		r("POST", "pods/{pod_id}/api-keys", "", "api_key_create", (*call).createKey),
		r("PATCH", "pods/{pod_id}/api-keys/{api_key_id}", "", "api_key_update", (*call).updateKey),
		r("DELETE", "pods/{pod_id}/api-keys/{api_key_id}", "", "api_key_delete", (*call).deleteKey),
		r("GET", "pods/{pod_id}/domains", "", "domain_read", (*call).listDomains),
		r("POST", "pods/{pod_id}/domains", "", "domain_create", (*call).createDomain),
		r("GET", "pods/{pod_id}/domains/{domain_id}", "", "domain_read", (*call).getDomain),
		r("PATCH", "pods/{pod_id}/domains/{domain_id}", "", "domain_update", (*call).updateDomain),
		r("DELETE", "pods/{pod_id}/domains/{domain_id}", "", "domain_delete", (*call).deleteDomain),
		r("POST", "pods/{pod_id}/domains/{domain_id}/verify", "", "domain_update", (*call).verifyDomain),
		r("GET", "pods/{pod_id}/domains/{domain_id}/zone-file", "", "domain_read", (*call).zoneFile),
	)
	return routes
}

func splitPattern(p string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(p); i++ {
		if i == len(p) || p[i] == '/' {
			if i > start {
				out = append(out, p[start:i])
			}
			start = i + 1
		}
	}
	return out
}
