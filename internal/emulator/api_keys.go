package emulator

import (
	"encoding/json"
	"strings"
)

func keyWire(k *apiKey) wireBearerKey {
	w := wireBearerKey{
		Type: "bearer", APIKeyID: k.id, Prefix: k.prefix, Name: k.name,
		PodID: k.podID, InboxID: k.inboxID, Permissions: permsWire(k.perms),
		CreatedAt: ts(k.createdAt), UpdatedAt: ts(k.updatedAt),
	}
	if !k.usedAt.IsZero() {
		w.UsedAt = tsPtr(k.usedAt)
	}
	return w
}

func permsWire(p map[string]bool) map[string]bool {
	if p == nil {
		return nil
	}
	out := make(map[string]bool, len(p))
	for k, v := range p {
		out[k] = v
	}
	return out
}

// parsePermissions decodes an ApiKeyPermissions object. It distinguishes
// an omitted/null object (unrestricted) from an object (whitelist).
func parsePermissions(raw json.RawMessage) (perms map[string]bool, present bool, err error) {
	if raw == nil || string(raw) == "null" {
		return nil, false, nil
	}
	var in map[string]*bool
	if err := json.Unmarshal(raw, &in); err != nil {
		return nil, true, errValidation("permissions must be an object of booleans")
	}
	perms = map[string]bool{}
	for name, v := range in {
		if !knownPermission[name] {
			return nil, true, errValidation("permissions: unknown permission " + name)
		}
		if v != nil {
			perms[name] = *v
		}
	}
	return perms, true, nil
}

// checkGrant enforces that a restricted key cannot create or widen an
// unrestricted key (unrestricted_key_required) nor grant a permission it
// lacks (permission_escalation).
func checkGrant(parent *apiKey, perms map[string]bool, present bool) error {
	if parent.perms == nil {
		return nil
	}
	if !present {
		return newAPIError(403, "ForbiddenError", "unrestricted_key_required", "Forbidden", "Only an unrestricted API key can create a key without a permissions whitelist; pass permissions.")
	}
	for name, v := range perms {
		if v && !parent.perms[name] {
			return newAPIError(403, "ForbiddenError", "permission_escalation", "Forbidden", "A restricted API key cannot grant "+name+".")
		}
	}
	return nil
}

// keyVisible reports whether target lies within the caller's scope.
func (c *call) keyVisibleLocked(target *apiKey) bool {
	k := c.key
	if target.orgID != k.orgID {
		return false
	}
	if k.inboxID != "" {
		return strings.EqualFold(target.inboxID, k.inboxID)
	}
	if k.podID != "" {
		if target.podID == k.podID {
			return true
		}
		if target.inboxID != "" {
			ib := c.s.state.lookupInbox(target.inboxID)
			return ib != nil && ib.podID == k.podID
		}
		return false
	}
	return true
}

// routeKeyFilterLocked resolves the inbox/pod of scoped key routes and
// returns a predicate selecting keys of that scope.
func (c *call) routeKeyFilterLocked() (func(*apiKey) bool, string, string, error) {
	if id, ok := c.p["inbox_id"]; ok {
		ib, err := c.inboxLocked(id)
		if err != nil {
			return nil, "", "", err
		}
		return func(k *apiKey) bool { return strings.EqualFold(k.inboxID, ib.id) }, "", ib.id, nil
	}
	if _, ok := c.p["pod_id"]; ok {
		p, err := c.podLocked()
		if err != nil {
			return nil, "", "", err
		}
		return func(k *apiKey) bool { return k.podID == p.id && k.inboxID == "" }, p.id, "", nil
	}
	return func(*apiKey) bool { return true }, "", "", nil
}

func (c *call) listKeys() (any, error) {
	lp, err := c.listParams()
	if err != nil {
		return nil, err
	}
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	filter, _, _, err := c.routeKeyFilterLocked()
	if err != nil {
		return nil, err
	}
	var all []*apiKey
	for _, k := range c.s.state.keys {
		if c.keyVisibleLocked(k) && filter(k) {
			all = append(all, k)
		}
	}
	page, next, err := paginate(all, func(k *apiKey) sortKey { return sortKey{k.createdAt, k.seq} }, "api-keys", lp)
	if err != nil {
		return nil, err
	}
	out := make([]wireBearerKey, 0, len(page))
	for _, k := range page {
		out = append(out, keyWire(k))
	}
	// ListApiKeysResponse has no limit field.
	resp := map[string]any{"count": len(out), "api_keys": out}
	if next != "" {
		resp["next_page_token"] = next
	}
	return resp, nil
}

func (c *call) getKey() (any, error) {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	k := c.s.state.keys[c.p["api_key_id"]]
	if k == nil || !c.keyVisibleLocked(k) {
		return nil, errNotFound("API key")
	}
	return keyWire(k), nil
}

type keyRequest struct {
	Name        *string         `json:"name"`
	Permissions json.RawMessage `json:"permissions"`
}

func (c *call) createKey() (any, error) {
	var req keyRequest
	if err := c.decode(&req, true); err != nil {
		return nil, err
	}
	perms, present, err := parsePermissions(req.Permissions)
	if err != nil {
		return nil, err
	}
	if err := checkGrant(c.key, perms, present); err != nil {
		return nil, err
	}
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	_, podID, inboxID, err := c.routeKeyFilterLocked()
	if err != nil {
		return nil, err
	}
	if podID == "" && inboxID == "" {
		// The unscoped route creates a key of the caller's own scope.
		podID, inboxID = c.key.podID, c.key.inboxID
	}
	if inboxID != "" {
		podID = ""
	}
	name := ""
	if req.Name != nil {
		name = *req.Name
	}
	k := c.s.addKeyLocked(c.key.orgID, podID, inboxID, name, "", perms)
	return wireCreateKeyResponse{
		APIKeyID: k.id, APIKey: k.secret, Prefix: k.prefix, Name: k.name,
		PodID: k.podID, InboxID: k.inboxID, Permissions: permsWire(k.perms), CreatedAt: ts(k.createdAt),
	}, nil
}

func (c *call) scopedKeyLocked() (*apiKey, error) {
	filter, _, _, err := c.routeKeyFilterLocked()
	if err != nil {
		return nil, err
	}
	k := c.s.state.keys[c.p["api_key_id"]]
	if k == nil || !c.keyVisibleLocked(k) || !filter(k) {
		return nil, errNotFound("API key")
	}
	return k, nil
}

func (c *call) updateKey() (any, error) {
	var req keyRequest
	if err := c.decode(&req, false); err != nil {
		return nil, err
	}
	perms, present, err := parsePermissions(req.Permissions)
	if err != nil {
		return nil, err
	}
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	k, err := c.scopedKeyLocked()
	if err != nil {
		return nil, err
	}
	if req.Permissions != nil {
		// Clearing permissions (null) or changing an unrestricted key's
		// permissions requires an unrestricted caller.
		if c.key.perms != nil && (!present || k.perms == nil) {
			return nil, newAPIError(403, "ForbiddenError", "unrestricted_key_required", "Forbidden", "Use an unrestricted API key.")
		}
		if err := checkGrant(c.key, perms, true); err != nil {
			return nil, err
		}
		k.perms = perms
	}
	if req.Name != nil {
		k.name = *req.Name
	}
	k.updatedAt = c.s.state.now()
	return keyWire(k), nil
}

func (c *call) deleteKey() (any, error) {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	k, err := c.scopedKeyLocked()
	if err != nil {
		return nil, err
	}
	delete(c.s.state.keys, k.id)
	delete(c.s.state.keyBySecret, k.secret)
	return noContent{}, nil
}
