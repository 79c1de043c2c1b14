package agentmail

import "testing"

// TestOperationFor: the 19 fixed operation names and
// the "request" fallback.
func TestOperationFor(t *testing.T) {
	t.Parallel()
	cases := []struct {
		method, path, want string
	}{
		{"GET", "/auth/me", OpInspectKey},
		{"GET", "/inboxes?limit=100", OpListInboxes},
		{"POST", "/inboxes", OpCreateInbox},
		{"GET", "/inboxes/agent%40agentmail.to", OpGetInbox},
		{"GET", "/domains?limit=100", OpListDomains},
		{"GET", "/domains/example.com", OpGetDomain},
		{"POST", "/inboxes/a%40b.c/api-keys", OpCreateInboxKey},
		{"DELETE", "/inboxes/a%40b.c/api-keys/key_1", OpDeleteInboxKey},
		{"POST", "/inboxes/a%40b.c/webhooks", OpCreateWebhook},
		{"DELETE", "/inboxes/a%40b.c/webhooks/ep_1", OpDeleteWebhook},
		{"GET", "/inboxes/a%40b.c/messages?ascending=true&limit=100&page_token=x", OpListMessages},
		{"GET", "/inboxes/a%40b.c/messages/%3Cm%40d%3E", OpGetMessage},
		{"GET", "/inboxes/a%40b.c/threads/thd_1", OpGetThread},
		{"POST", "/inboxes/a%40b.c/messages/send", OpSendMessage},
		{"POST", "/inboxes/a%40b.c/messages/%3Cm%40d%3E/reply", OpReplyMessage},
		{"GET", "/inboxes/a%40b.c/messages/%3Cm%40d%3E/attachments/att_1", OpGetAttachment},
		{"GET", "/inboxes/a%40b.c/lists/receive/block?limit=100", OpListListEntries},
		{"POST", "/inboxes/a%40b.c/lists/reply/allow", OpCreateListEntry},
		{"DELETE", "/inboxes/a%40b.c/lists/receive/block/spam.example", OpDeleteListEntry},
		// Lower-case methods are normalized.
		{"get", "/auth/me", OpInspectKey},
		// An id containing an escaped slash is one segment.
		{"GET", "/inboxes/a%2Fb/messages/%3Cx%2Fy%40d%3E", OpGetMessage},

		// Unmatched.
		{"PATCH", "/inboxes/a%40b.c", OpRequest},
		{"GET", "/totally/arbitrary/path", OpRequest},
		{"GET", "/inboxes/a%40b.c/webhooks", OpRequest},
		{"POST", "/inboxes/a%40b.c/messages/%3Cm%3E/reply-all", OpRequest},
		{"DELETE", "/inboxes/a%40b.c", OpRequest},
		{"GET", "/inboxes//messages", OpRequest},
		{"GET", "/inboxes/", OpRequest},
		{"GET", "/auth/me/", OpRequest},
		{"GET", "", OpRequest},
		{"GET", "/v0/auth/me", OpRequest},
		{"PUT", "/inboxes", OpRequest},
		{"POST", "/inboxes/a%40b.c/messages", OpRequest},
	}
	for _, c := range cases {
		if got := OperationFor(c.method, c.path); got != c.want {
			t.Errorf("OperationFor(%s, %s) = %q, want %q", c.method, c.path, got, c.want)
		}
	}
}

func TestEscapeSegment(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"agent@agentmail.to":   "agent%40agentmail.to",
		"<message@domain>":     "%3Cmessage%40domain%3E",
		"a/b":                  "a%2Fb",
		"a+b c":                "a%2Bb%20c",
		".":                    "%2E",
		"..":                   "%2E%2E",
		"...":                  "...",
		"thd_AZ-09.~":          "thd_AZ-09.~",
		"ü":                    "%C3%BC",
		"%41":                  "%2541",
		"?#":                   "%3F%23",
		"<x@y>/reply?evil=1#f": "%3Cx%40y%3E%2Freply%3Fevil%3D1%23f",
	}
	for in, want := range cases {
		if got := escapeSegment(in); got != want {
			t.Errorf("escapeSegment(%q) = %q, want %q", in, got, want)
		}
	}
}
