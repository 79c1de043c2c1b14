package emulator

import (
	"net/url"
	"sort"
	"strings"
)

func webhookWire(wh *webhook) wireWebhook {
	return wireWebhook{
		WebhookID: wh.id, URL: wh.url, EventTypes: copyStrings(wh.eventTypes),
		PodIDs: copyStrings(wh.podIDs), InboxIDs: copyStrings(wh.inboxIDs),
		Secret: wh.secret, Enabled: wh.enabled, ClientID: wh.clientID,
		UpdatedAt: ts(wh.updatedAt), CreatedAt: ts(wh.createdAt),
	}
}

// webhookRouteLocked resolves the scope of a webhook route: the inbox or
// pod in its path, or the organization (org keys only).
func (c *call) webhookRouteLocked() (podID, inboxID string, err error) {
	if id, ok := c.p["inbox_id"]; ok {
		ib, err := c.inboxLocked(id)
		if err != nil {
			return "", "", err
		}
		return "", ib.id, nil
	}
	if _, ok := c.p["pod_id"]; ok {
		p, err := c.podLocked()
		if err != nil {
			return "", "", err
		}
		return p.id, "", nil
	}
	if err := requireOrgScope(c.key); err != nil {
		return "", "", err
	}
	return "", "", nil
}

func (c *call) webhookInRoute(wh *webhook, podID, inboxID string) bool {
	if wh.orgID != c.key.orgID {
		return false
	}
	switch {
	case inboxID != "":
		return strings.EqualFold(wh.scopeInboxID, inboxID)
	case podID != "":
		return wh.scopePodID == podID
	}
	return true
}

func (c *call) validateEventTypes(types []string) error {
	for _, t := range types {
		if !knownEventTypes[t] {
			return errValidation("event_types: unknown event type " + t)
		}
		if label := filteredEventLabel[t]; label != "" && !canSeeLabel(c.key, label) {
			return newAPIError(403, "ForbiddenError", "missing_permission", hiddenLabelPermission[label]+" is forbidden", "Grant "+hiddenLabelPermission[label]+" to subscribe to "+t+".")
		}
	}
	return nil
}

func validateHeaders(h map[string]string) error {
	for k, v := range h {
		if !headerNamePattern.MatchString(k) || strings.ContainsAny(v, "\r\n") {
			return errValidation("headers: invalid header " + k)
		}
	}
	return nil
}

func (c *call) resolveInboxIDsLocked(ids []string) ([]string, error) {
	if len(ids) > 10 {
		return nil, errValidation("inbox_ids: at most 10")
	}
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		ib, err := c.inboxLocked(id)
		if err != nil {
			return nil, err
		}
		out = append(out, ib.id)
	}
	return out, nil
}

func (c *call) resolvePodIDsLocked(ids []string) ([]string, error) {
	if len(ids) > 10 {
		return nil, errValidation("pod_ids: at most 10")
	}
	for _, id := range ids {
		if p := c.s.state.pods[id]; p == nil || !podInScope(c.key, p) {
			return nil, errNotFound("Pod")
		}
	}
	return copyStrings(ids), nil
}

func (c *call) createWebhook() (any, error) {
	var req struct {
		URL        string            `json:"url"`
		EventTypes []string          `json:"event_types"`
		ClientID   string            `json:"client_id"`
		Headers    map[string]string `json:"headers"`
		InboxIDs   []string          `json:"inbox_ids"`
		PodIDs     []string          `json:"pod_ids"`
	}
	if err := c.decode(&req, false); err != nil {
		return nil, err
	}
	u, err := url.Parse(req.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errValidation("url must be an absolute http(s) URL")
	}
	if err := c.validateEventTypes(req.EventTypes); err != nil {
		return nil, err
	}
	if req.Headers != nil && len(req.Headers) == 0 {
		return nil, errValidation("headers must have at least one entry when present")
	}
	if err := validateHeaders(req.Headers); err != nil {
		return nil, err
	}
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	podID, inboxID, err := c.webhookRouteLocked()
	if err != nil {
		return nil, err
	}
	if inboxID != "" && (req.InboxIDs != nil || req.PodIDs != nil) {
		return nil, errValidation("inbox webhooks take no inbox_ids or pod_ids")
	}
	if podID != "" && req.PodIDs != nil {
		return nil, errValidation("pod webhooks take no pod_ids")
	}
	inboxIDs, err := c.resolveInboxIDsLocked(req.InboxIDs)
	if err != nil {
		return nil, err
	}
	podIDs, err := c.resolvePodIDsLocked(req.PodIDs)
	if err != nil {
		return nil, err
	}
	st := &c.s.state
	if req.ClientID != "" {
		for _, wh := range st.webhooks {
			if wh.clientID == req.ClientID && c.webhookInRoute(wh, podID, inboxID) {
				return webhookWire(wh), nil
			}
		}
	}
	switch {
	case inboxID != "":
		inboxIDs = []string{inboxID}
	case podID != "" && len(inboxIDs) == 0:
		podIDs = []string{podID}
	}
	now := st.now()
	wh := &webhook{
		id: "ep_" + randomAlnum(27), orgID: c.key.orgID, url: req.URL, secret: newWebhookSecret(),
		clientID: req.ClientID, eventTypes: copyStrings(req.EventTypes), inboxIDs: inboxIDs, podIDs: podIDs,
		headers: copyHeaders(req.Headers), enabled: true, scopePodID: podID, scopeInboxID: inboxID,
		seq: st.nextSeq(), createdAt: now, updatedAt: now,
	}
	st.webhooks[wh.id] = wh
	return webhookWire(wh), nil
}

func (c *call) listWebhooks() (any, error) {
	lp, err := c.listParams()
	if err != nil {
		return nil, err
	}
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	podID, inboxID, err := c.webhookRouteLocked()
	if err != nil {
		return nil, err
	}
	var all []*webhook
	for _, wh := range c.s.state.webhooks {
		if c.webhookInRoute(wh, podID, inboxID) {
			all = append(all, wh)
		}
	}
	return listPage("webhooks", all, func(w *webhook) sortKey { return sortKey{w.createdAt, w.seq} }, "webhooks", lp, webhookWire)
}

func (c *call) webhookLocked() (*webhook, error) {
	podID, inboxID, err := c.webhookRouteLocked()
	if err != nil {
		return nil, err
	}
	wh := c.s.state.webhooks[c.p["webhook_id"]]
	if wh == nil || !c.webhookInRoute(wh, podID, inboxID) {
		return nil, errNotFound("Webhook")
	}
	return wh, nil
}

func (c *call) getWebhook() (any, error) {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	wh, err := c.webhookLocked()
	if err != nil {
		return nil, err
	}
	return webhookWire(wh), nil
}

func (c *call) deleteWebhook() (any, error) {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	wh, err := c.webhookLocked()
	if err != nil {
		return nil, err
	}
	delete(c.s.state.webhooks, wh.id)
	return noContent{}, nil
}

func (c *call) updateWebhook() (any, error) {
	var req struct {
		EventTypes     []string `json:"event_types"`
		AddInboxIDs    []string `json:"add_inbox_ids"`
		RemoveInboxIDs []string `json:"remove_inbox_ids"`
		AddPodIDs      []string `json:"add_pod_ids"`
		RemovePodIDs   []string `json:"remove_pod_ids"`
	}
	if err := c.decode(&req, false); err != nil {
		return nil, err
	}
	if err := c.validateEventTypes(req.EventTypes); err != nil {
		return nil, err
	}
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	wh, err := c.webhookLocked()
	if err != nil {
		return nil, err
	}
	if wh.scopeInboxID != "" && (req.AddInboxIDs != nil || req.RemoveInboxIDs != nil || req.AddPodIDs != nil || req.RemovePodIDs != nil) {
		return nil, errValidation("inbox webhooks only update event_types")
	}
	add, err := c.resolveInboxIDsLocked(req.AddInboxIDs)
	if err != nil {
		return nil, err
	}
	addPods, err := c.resolvePodIDsLocked(req.AddPodIDs)
	if err != nil {
		return nil, err
	}
	inboxes := mergeIDs(wh.inboxIDs, add, req.RemoveInboxIDs)
	pods := mergeIDs(wh.podIDs, addPods, req.RemovePodIDs)
	if len(inboxes) > 10 || len(pods) > 10 {
		return nil, errValidation("A webhook can filter at most 10 inboxes and 10 pods")
	}
	if wh.scopePodID != "" && len(inboxes) == 0 && len(pods) == 0 {
		return nil, errValidation("A pod webhook must keep at least one inbox or pod")
	}
	if len(req.EventTypes) > 0 {
		wh.eventTypes = copyStrings(req.EventTypes)
	}
	wh.inboxIDs, wh.podIDs = inboxes, pods
	wh.updatedAt = c.s.state.now()
	return webhookWire(wh), nil
}

func mergeIDs(cur, add, remove []string) []string {
	out := copyStrings(cur)
	for _, a := range add {
		found := false
		for _, x := range out {
			if strings.EqualFold(x, a) {
				found = true
			}
		}
		if !found {
			out = append(out, a)
		}
	}
	var kept []string
	for _, x := range out {
		drop := false
		for _, r := range remove {
			if strings.EqualFold(x, r) {
				drop = true
			}
		}
		if !drop {
			kept = append(kept, x)
		}
	}
	return kept
}

func (c *call) getWebhookHeaders() (any, error) {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	wh, err := c.webhookLocked()
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(wh.headers))
	for k := range wh.headers {
		names = append(names, k)
	}
	sort.Strings(names)
	return map[string]any{"header_names": names}, nil
}

func (c *call) updateWebhookHeaders() (any, error) {
	var req struct {
		Headers       map[string]string `json:"headers"`
		RemoveHeaders []string          `json:"remove_headers"`
	}
	if err := c.decode(&req, false); err != nil {
		return nil, err
	}
	if err := validateHeaders(req.Headers); err != nil {
		return nil, err
	}
	for _, r := range req.RemoveHeaders {
		for k := range req.Headers {
			if strings.EqualFold(k, r) {
				return nil, errValidation("header " + k + " is both set and removed")
			}
		}
	}
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	wh, err := c.webhookLocked()
	if err != nil {
		return nil, err
	}
	if wh.headers == nil {
		wh.headers = map[string]string{}
	}
	for _, r := range req.RemoveHeaders {
		for k := range wh.headers {
			if strings.EqualFold(k, r) {
				delete(wh.headers, k)
			}
		}
	}
	for k, v := range req.Headers {
		for existing := range wh.headers {
			if strings.EqualFold(existing, k) {
				delete(wh.headers, existing)
			}
		}
		wh.headers[k] = v
	}
	wh.updatedAt = c.s.state.now()
	return noContent{}, nil
}
