package emulator

import "strings"

// allPermissions lists every permission name of ApiKeyPermissions.
var allPermissions = []string{
	"inbox_read", "inbox_create", "inbox_update", "inbox_delete",
	"message_read", "message_send", "message_update", "message_delete",
	"label_spam_read", "label_blocked_read", "label_unauthenticated_read", "label_trash_read",
	"draft_read", "draft_create", "draft_update", "draft_delete", "draft_send",
	"webhook_read", "webhook_create", "webhook_update", "webhook_delete",
	"domain_read", "domain_create", "domain_update", "domain_delete",
	"list_entry_read", "list_entry_create", "list_entry_delete",
	"metrics_read",
	"api_key_read", "api_key_create", "api_key_update", "api_key_delete",
	"provider_connect", "provider_share_owner",
	"pod_read", "pod_create", "pod_delete",
}

var knownPermission = func() map[string]bool {
	m := map[string]bool{}
	for _, p := range allPermissions {
		m[p] = true
	}
	return m
}()

// hiddenLabelPermission maps the labels that hide a message from ordinary
// reads to the permission that makes them readable.
var hiddenLabelPermission = map[string]string{
	"spam":            "label_spam_read",
	"blocked":         "label_blocked_read",
	"unauthenticated": "label_unauthenticated_read",
	"trash":           "label_trash_read",
}

// authenticate checks the Authorization header. bare reports the gateway
// rejection (unknown key) that answers a bare 403 {"message":"Forbidden"}.
func (s *Server) authenticate(header string) (key *apiKey, aerr *apiError, bare bool) {
	if header == "" {
		return nil, errUnauthorized("missing_authorization", "Missing Authorization header"), false
	}
	secret, ok := strings.CutPrefix(header, "Bearer ")
	if !ok || secret == "" || strings.ContainsAny(secret, " \t\r\n") {
		return nil, errUnauthorized("missing_authorization", "Authorization header must be 'Bearer <api_key>'"), false
	}
	if strings.HasPrefix(secret, "eyJ") {
		return nil, errUnauthorized("invalid_token_type", "Console session tokens cannot be used as API keys"), false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := s.state.keyBySecret[secret]
	if k == nil {
		return nil, nil, true
	}
	k.usedAt = s.state.now()
	// Handlers read the key without holding s.mu, so they get a snapshot;
	// updates replace (never mutate) the permission map, so sharing it is
	// safe.
	snapshot := *k
	return &snapshot, nil, false
}

// keyHas reports whether the key's permission whitelist grants perm. An
// omitted whitelist means full access within the key's scope.
func keyHas(k *apiKey, perm string) bool {
	if k.perms == nil {
		return true
	}
	return k.perms[perm]
}

// canSeeLabel reports whether k may read items carrying label.
func canSeeLabel(k *apiKey, label string) bool {
	perm, hidden := hiddenLabelPermission[label]
	return !hidden || keyHas(k, perm)
}

// inboxInScope reports whether the inbox is inside the key's scope.
func inboxInScope(k *apiKey, ib *inbox) bool {
	if ib == nil || ib.orgID != k.orgID {
		return false
	}
	if k.podID != "" && ib.podID != k.podID {
		return false
	}
	if k.inboxID != "" && !strings.EqualFold(ib.id, k.inboxID) {
		return false
	}
	return true
}

// podInScope reports whether the pod is inside the key's scope (an inbox key
// sees its inbox's pod only through the inbox).
func podInScope(k *apiKey, p *pod) bool {
	if p == nil || p.orgID != k.orgID {
		return false
	}
	return k.podID == "" || k.podID == p.id
}

// requireOrgScope rejects pod- and inbox-scoped keys on organization-wide
// management routes with 403 forbidden.
func requireOrgScope(k *apiKey) error {
	if k.scopeType() != "organization" {
		return errForbidden("Forbidden", "Use an organization-scoped API key for this operation.")
	}
	return nil
}

// requireNotInboxScope rejects inbox-scoped keys (e.g. on pod routes).
func requireNotInboxScope(k *apiKey) error {
	if k.inboxID != "" {
		return errForbidden("Forbidden", "Inbox-scoped API keys cannot use this route.")
	}
	return nil
}

// inboxLocked resolves an inbox path parameter within the key's scope;
// out-of-scope and missing inboxes are indistinguishable (404).
func (c *call) inboxLocked(id string) (*inbox, error) {
	ib := c.s.state.lookupInbox(id)
	if ib == nil || !inboxInScope(c.key, ib) {
		return nil, errNotFound("Inbox")
	}
	if pid := c.p["pod_id"]; pid != "" && ib.podID != pid {
		return nil, errNotFound("Inbox")
	}
	return ib, nil
}

// podLocked resolves a pod path parameter within the key's scope.
func (c *call) podLocked() (*pod, error) {
	if err := requireNotInboxScope(c.key); err != nil {
		return nil, err
	}
	p := c.s.state.pods[c.p["pod_id"]]
	if p == nil || !podInScope(c.key, p) {
		return nil, errNotFound("Pod")
	}
	return p, nil
}
