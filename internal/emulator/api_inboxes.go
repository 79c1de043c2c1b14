package emulator

import (
	"encoding/json"
	"regexp"
	"strings"
	"time"
)

func (c *call) authMe() (any, error) {
	k := c.key
	id := map[string]any{
		"scope_type": k.scopeType(), "organization_id": k.orgID, "api_key_id": k.id,
	}
	scopeID := k.orgID
	c.s.mu.Lock()
	podID := k.podID
	if k.inboxID != "" {
		if ib := c.s.state.lookupInbox(k.inboxID); ib != nil {
			podID = ib.podID
		}
		id["inbox_id"] = k.inboxID
		scopeID = k.inboxID
	} else if k.podID != "" {
		scopeID = k.podID
	}
	c.s.mu.Unlock()
	if podID != "" {
		id["pod_id"] = podID
	}
	id["scope_id"] = scopeID
	return id, nil
}

func (c *call) getOrganization() (any, error) {
	if err := requireOrgScope(c.key); err != nil {
		return nil, err
	}
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	org := c.s.state.orgs[c.key.orgID]
	if org == nil {
		return nil, errNotFound("Organization")
	}
	inboxes, domains := 0, 0
	for _, ib := range c.s.state.inboxes {
		if ib.orgID == org.id {
			inboxes++
		}
	}
	for _, d := range c.s.state.domains {
		if d.orgID == org.id {
			domains++
		}
	}
	return map[string]any{
		"organization_id": org.id, "inbox_count": inboxes, "domain_count": domains,
		"updated_at": ts(org.updatedAt), "created_at": ts(org.createdAt),
	}, nil
}

func inboxWire(ib *inbox) wireInbox {
	w := wireInbox{
		PodID: ib.podID, InboxID: ib.id, Email: ib.id, DisplayName: ib.displayName, ClientID: ib.clientID,
		UpdatedAt: ts(ib.updatedAt), CreatedAt: ts(ib.createdAt),
	}
	if len(ib.metadata) > 0 {
		w.Metadata = make(map[string]any, len(ib.metadata))
		for k, v := range ib.metadata {
			w.Metadata[k] = v
		}
	}
	return w
}

// visibleInboxesLocked lists the inboxes in the key's scope, restricted to
// the pod of a pod-prefixed route.
func (c *call) visibleInboxesLocked() ([]*inbox, error) {
	podFilter := ""
	if _, ok := c.p["pod_id"]; ok {
		p, err := c.podLocked()
		if err != nil {
			return nil, err
		}
		podFilter = p.id
	}
	var out []*inbox
	for _, ib := range c.s.state.inboxes {
		if inboxInScope(c.key, ib) && (podFilter == "" || ib.podID == podFilter) {
			out = append(out, ib)
		}
	}
	return out, nil
}

func (c *call) listInboxes() (any, error) {
	lp, err := c.listParams()
	if err != nil {
		return nil, err
	}
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	all, err := c.visibleInboxesLocked()
	if err != nil {
		return nil, err
	}
	return listPage("inboxes", all, func(ib *inbox) sortKey { return sortKey{ib.createdAt, ib.seq} }, "inboxes", lp, inboxWire)
}

// listPage pages items (see paginate) and renders the page, each item
// through wire, as one list response under field.
func listPage[T, W any](field string, items []T, key func(T) sortKey, cursor string, lp listParams, wire func(T) W) (any, error) {
	page, next, err := paginate(items, key, cursor, lp)
	if err != nil {
		return nil, err
	}
	out := make([]W, 0, len(page))
	for _, v := range page {
		out = append(out, wire(v))
	}
	return listResponse(field, out, len(out), lp.limit, next), nil
}

// listResponse renders {count, limit, next_page_token?, <field>: items}.
func listResponse(field string, items any, count, limit int, next string) map[string]any {
	resp := map[string]any{"count": count, "limit": limit, field: items}
	if next != "" {
		resp["next_page_token"] = next
	}
	return resp
}

func wordPrefixMatch(words []string, hay string) bool {
	fields := strings.FieldsFunc(strings.ToLower(hay), func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9')
	})
	for _, w := range words {
		found := false
		for _, f := range fields {
			if strings.HasPrefix(f, w) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

func (c *call) searchInboxes() (any, error) {
	q, lp, err := c.searchParams()
	if err != nil {
		return nil, err
	}
	words := strings.FieldsFunc(strings.ToLower(q), func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9')
	})
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	all, err := c.visibleInboxesLocked()
	if err != nil {
		return nil, err
	}
	var hits []*inbox
	for _, ib := range all {
		if strings.EqualFold(ib.id, q) || wordPrefixMatch(words, ib.id+" "+ib.displayName) {
			hits = append(hits, ib)
		}
	}
	// An exact address match ranks first; the rest newest first.
	top := time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
	return listPage("inboxes", hits, func(ib *inbox) sortKey {
		if strings.EqualFold(ib.id, q) {
			return sortKey{top, ib.seq}
		}
		return sortKey{ib.createdAt, ib.seq}
	}, "inbox-search:"+q, lp, inboxWire)
}

func (c *call) getInbox() (any, error) {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	ib, err := c.inboxLocked(c.p["inbox_id"])
	if err != nil {
		return nil, err
	}
	return inboxWire(ib), nil
}

var usernamePattern = regexp.MustCompile(`^[a-z0-9](?:[a-z0-9._-]{0,62}[a-z0-9])?$`)
var domainPattern = regexp.MustCompile(`^(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$`)

// validateMetadata enforces the documented metadata limits and value types.
func validateMetadata(m map[string]any, allowNull bool) error {
	if len(m) > 256 {
		return errValidation("metadata: at most 256 keys")
	}
	for k, v := range m {
		if k == "" || len(k) > 256 {
			return errValidation("metadata: keys must be 1-256 characters")
		}
		switch x := v.(type) {
		case string:
			if len(x) > 256 {
				return errValidation("metadata: string values must be at most 256 characters")
			}
		case float64, bool:
		case nil:
			if !allowNull {
				return errValidation("metadata: values must be string, number or boolean")
			}
		default:
			return errValidation("metadata: values must be string, number or boolean")
		}
	}
	return nil
}

func (c *call) createInbox() (any, error) {
	if c.key.inboxID != "" {
		return nil, errForbidden("Forbidden", "Inbox-scoped API keys cannot create inboxes.")
	}
	var req struct {
		Username    string         `json:"username"`
		Domain      string         `json:"domain"`
		DisplayName string         `json:"display_name"`
		ClientID    string         `json:"client_id"`
		Metadata    map[string]any `json:"metadata"`
	}
	if err := c.decode(&req, true); err != nil {
		return nil, err
	}
	if strings.Contains(req.ClientID, "@") {
		return nil, errValidation("client_id must not contain @")
	}
	if err := validateMetadata(req.Metadata, false); err != nil {
		return nil, err
	}
	username := strings.ToLower(strings.TrimSpace(req.Username))
	if username == "" {
		username = "agent" + randomAlnum(10)
	}
	if !usernamePattern.MatchString(username) {
		return nil, errValidation("username: use letters, digits, '.', '_' or '-', not starting or ending with a separator")
	}
	dom := strings.ToLower(strings.TrimSpace(req.Domain))
	if dom == "" {
		dom = DefaultDomain
	}

	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	st := &c.s.state
	podID := c.key.podID
	if _, ok := c.p["pod_id"]; ok {
		p, err := c.podLocked()
		if err != nil {
			return nil, err
		}
		podID = p.id
	}
	if podID == "" {
		podID = st.orgs[c.key.orgID].podID
	}
	if req.ClientID != "" {
		for _, ib := range st.inboxes {
			if ib.orgID == c.key.orgID && ib.clientID == req.ClientID {
				return inboxWire(ib), nil
			}
		}
	}
	if err := c.checkInboxDomainLocked(dom); err != nil {
		return nil, err
	}
	addr := username + "@" + dom
	if st.inboxes[addr] != nil {
		return nil, errTaken("Inbox " + addr + " is already taken")
	}
	now := st.now()
	ib := &inbox{
		id: addr, orgID: c.key.orgID, podID: podID, displayName: req.DisplayName, clientID: req.ClientID,
		metadata: req.Metadata, seq: st.nextSeq(), createdAt: now, updatedAt: now,
	}
	st.inboxes[addr] = ib
	return inboxWire(ib), nil
}

// checkInboxDomainLocked allows the default domain, verified custom
// domains of the organization, and subdomains of verified domains with
// subdomains enabled.
func (c *call) checkInboxDomainLocked(dom string) error {
	if dom == DefaultDomain {
		return nil
	}
	if !domainPattern.MatchString(dom) {
		return errValidation("domain: invalid domain name")
	}
	st := &c.s.state
	if d := st.domains[dom]; d != nil && d.orgID == c.key.orgID {
		if d.status != "VERIFIED" {
			return newAPIError(403, "ForbiddenError", "domain_not_verified", "Domain "+dom+" is not verified", "Verify the domain before creating inboxes on it.")
		}
		return nil
	}
	for parent := dom; strings.Contains(parent, "."); {
		_, parent, _ = strings.Cut(parent, ".")
		d := st.domains[parent]
		if d == nil || d.orgID != c.key.orgID {
			continue
		}
		if d.status != "VERIFIED" {
			return newAPIError(403, "ForbiddenError", "domain_not_verified", "Domain "+parent+" is not verified", "Verify the domain before creating inboxes on it.")
		}
		if !d.subdomainsEnabled {
			return errUnprocessable("Subdomains are not enabled for " + parent)
		}
		return nil
	}
	return errNotFound("Domain")
}

func (c *call) updateInbox() (any, error) {
	var req struct {
		DisplayName *string         `json:"display_name"`
		Metadata    json.RawMessage `json:"metadata"`
	}
	if err := c.decode(&req, false); err != nil {
		return nil, err
	}
	if req.DisplayName == nil && req.Metadata == nil {
		return nil, errValidation("Provide display_name or metadata")
	}
	var meta map[string]any
	clearMeta := false
	if req.Metadata != nil {
		if string(req.Metadata) == "null" {
			clearMeta = true
		} else {
			if err := json.Unmarshal(req.Metadata, &meta); err != nil {
				return nil, errValidation("metadata must be an object")
			}
			if len(meta) == 0 {
				return nil, errValidation("metadata must not be empty; use null to clear it")
			}
			if err := validateMetadata(meta, true); err != nil {
				return nil, err
			}
		}
	}
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	ib, err := c.inboxLocked(c.p["inbox_id"])
	if err != nil {
		return nil, err
	}
	if req.DisplayName != nil {
		ib.displayName = *req.DisplayName
	}
	if clearMeta {
		ib.metadata = nil
	}
	if meta != nil {
		merged := map[string]any{}
		for k, v := range ib.metadata {
			merged[k] = v
		}
		for k, v := range meta {
			if v == nil {
				delete(merged, k)
			} else {
				merged[k] = v
			}
		}
		if len(merged) > 256 {
			return nil, errValidation("metadata: at most 256 keys")
		}
		ib.metadata = merged
	}
	ib.updatedAt = c.s.state.now()
	return inboxWire(ib), nil
}

func (c *call) deleteInbox() (any, error) {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	ib, err := c.inboxLocked(c.p["inbox_id"])
	if err != nil {
		return nil, err
	}
	c.s.deleteInboxLocked(ib)
	return noContent{}, nil
}

// deleteInboxLocked removes an inbox with its messages, threads, scoped
// API keys and scoped webhooks.
func (s *Server) deleteInboxLocked(ib *inbox) {
	st := &s.state
	for _, m := range append([]*message(nil), st.inboxMsgs[ib.id]...) {
		st.deleteMessageLocked(m)
	}
	delete(st.inboxMsgs, ib.id)
	for id, k := range st.keys {
		if strings.EqualFold(k.inboxID, ib.id) {
			delete(st.keys, id)
			delete(st.keyBySecret, k.secret)
		}
	}
	for id, wh := range st.webhooks {
		if strings.EqualFold(wh.scopeInboxID, ib.id) {
			delete(st.webhooks, id)
		}
	}
	delete(st.inboxes, ib.id)
}

// Pods.

func podWire(p *pod) wirePod {
	return wirePod{PodID: p.id, Name: p.name, ClientID: p.clientID, UpdatedAt: ts(p.updatedAt), CreatedAt: ts(p.createdAt)}
}

func (c *call) listPods() (any, error) {
	if err := requireNotInboxScope(c.key); err != nil {
		return nil, err
	}
	lp, err := c.listParams()
	if err != nil {
		return nil, err
	}
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	var all []*pod
	for _, p := range c.s.state.pods {
		if podInScope(c.key, p) {
			all = append(all, p)
		}
	}
	return listPage("pods", all, func(p *pod) sortKey { return sortKey{p.createdAt, p.seq} }, "pods", lp, podWire)
}

func (c *call) getPod() (any, error) {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	p, err := c.podLocked()
	if err != nil {
		return nil, err
	}
	return podWire(p), nil
}

func (c *call) createPod() (any, error) {
	if err := requireOrgScope(c.key); err != nil {
		return nil, err
	}
	var req struct {
		Name     string `json:"name"`
		ClientID string `json:"client_id"`
	}
	if err := c.decode(&req, true); err != nil {
		return nil, err
	}
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	st := &c.s.state
	if req.ClientID != "" {
		for _, p := range st.pods {
			if p.orgID == c.key.orgID && p.clientID == req.ClientID {
				return podWire(p), nil
			}
		}
	}
	now := st.now()
	name := req.Name
	if name == "" {
		name = "pod-" + randomAlnum(6)
	}
	p := &pod{id: newUUID(), orgID: c.key.orgID, name: name, clientID: req.ClientID, seq: st.nextSeq(), createdAt: now, updatedAt: now}
	st.pods[p.id] = p
	return podWire(p), nil
}

func (c *call) deletePod() (any, error) {
	if err := requireOrgScope(c.key); err != nil {
		return nil, err
	}
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	p, err := c.podLocked()
	if err != nil {
		return nil, err
	}
	st := &c.s.state
	if st.orgs[p.orgID] != nil && st.orgs[p.orgID].podID == p.id {
		return nil, newAPIError(403, "ForbiddenError", "cannot_delete", "The default pod cannot be deleted", "")
	}
	for _, ib := range st.inboxes {
		if ib.podID == p.id {
			return nil, newAPIError(403, "ForbiddenError", "cannot_delete", "Pod still has inboxes", "Delete the pod's inboxes first.")
		}
	}
	delete(st.pods, p.id)
	return noContent{}, nil
}
