package emulator

import (
	"fmt"
	"strings"
)

func domainItemWire(d *domain) wireDomainItem {
	return wireDomainItem{
		PodID: d.podID, DomainID: d.name, Domain: d.name,
		FeedbackEnabled: d.feedbackEnabled, SubdomainsEnabled: d.subdomainsEnabled, TrackingEnabled: d.trackingEnabled,
		ClientID: d.clientID, UpdatedAt: ts(d.updatedAt), CreatedAt: ts(d.createdAt),
	}
}

// domainRecords returns the DNS records a domain needs, VALID once verified.
func domainRecords(d *domain) []wireRecord {
	status := "MISSING"
	if d.status == "VERIFIED" {
		status = "VALID"
	}
	ten := 10
	recs := []wireRecord{
		{Type: "TXT", Name: d.name, Value: "v=spf1 include:spf.agentmail.to ~all", Status: status},
		{Type: "TXT", Name: "agentmail._domainkey." + d.name, Value: "v=DKIM1; k=rsa; p=MIGfMA0GCSqGSIb3DQEBAQUAA4GNADCBiQKBgQDemulator", Status: status},
		{Type: "TXT", Name: "_dmarc." + d.name, Value: "v=DMARC1; p=none", Status: status},
		{Type: "MX", Name: d.name, Value: "inbound-smtp.us-east-1.amazonaws.com", Status: status, Priority: &ten},
	}
	if d.subdomainsEnabled {
		recs = append(recs, wireRecord{Type: "MX", Name: "*." + d.name, Value: "inbound-smtp.us-east-1.amazonaws.com", Status: status, Priority: &ten})
	}
	return recs
}

func domainWire(d *domain) wireDomain {
	return wireDomain{
		PodID: d.podID, DomainID: d.name, Domain: d.name, Status: d.status,
		FeedbackEnabled: d.feedbackEnabled, SubdomainsEnabled: d.subdomainsEnabled, TrackingEnabled: d.trackingEnabled,
		Records: domainRecords(d), ClientID: d.clientID, UpdatedAt: ts(d.updatedAt), CreatedAt: ts(d.createdAt),
	}
}

// domainRouteLocked resolves the pod of a pod-prefixed domain route; inbox
// keys have no domain access.
func (c *call) domainRouteLocked() (string, error) {
	if err := requireNotInboxScope(c.key); err != nil {
		return "", err
	}
	if _, ok := c.p["pod_id"]; ok {
		p, err := c.podLocked()
		if err != nil {
			return "", err
		}
		return p.id, nil
	}
	return c.key.podID, nil
}

func (c *call) domainLocked() (*domain, error) {
	podID, err := c.domainRouteLocked()
	if err != nil {
		return nil, err
	}
	d := c.s.state.domains[strings.ToLower(c.p["domain_id"])]
	if d == nil || d.orgID != c.key.orgID || (podID != "" && d.podID != podID) {
		return nil, errNotFound("Domain")
	}
	return d, nil
}

func (c *call) listDomains() (any, error) {
	lp, err := c.listParams()
	if err != nil {
		return nil, err
	}
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	podID, err := c.domainRouteLocked()
	if err != nil {
		return nil, err
	}
	var all []*domain
	for _, d := range c.s.state.domains {
		if d.orgID == c.key.orgID && (podID == "" || d.podID == podID) {
			all = append(all, d)
		}
	}
	return listPage("domains", all, func(d *domain) sortKey { return sortKey{d.createdAt, d.seq} }, "domains", lp, domainItemWire)
}

func (c *call) getDomain() (any, error) {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	d, err := c.domainLocked()
	if err != nil {
		return nil, err
	}
	return domainWire(d), nil
}

func (c *call) createDomain() (any, error) {
	var req struct {
		Domain                   string `json:"domain"`
		AllowConflictingProvider *bool  `json:"allow_conflicting_provider"`
		FeedbackEnabled          *bool  `json:"feedback_enabled"`
		SubdomainsEnabled        *bool  `json:"subdomains_enabled"`
		TrackingEnabled          *bool  `json:"tracking_enabled"`
	}
	if err := c.decode(&req, false); err != nil {
		return nil, err
	}
	name := strings.ToLower(strings.TrimSuffix(strings.TrimSpace(req.Domain), "."))
	if !domainPattern.MatchString(name) {
		return nil, errValidation("domain: invalid domain name")
	}
	if name == DefaultDomain || strings.HasSuffix(name, "."+DefaultDomain) {
		return nil, errForbidden("Forbidden", "The shared "+DefaultDomain+" domain cannot be added.")
	}
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	podID, err := c.domainRouteLocked()
	if err != nil {
		return nil, err
	}
	st := &c.s.state
	if st.domains[name] != nil {
		return nil, newAPIError(403, "IsTakenError", "already_exists", "Domain "+name+" already exists", "")
	}
	now := st.now()
	d := &domain{
		name: name, orgID: c.key.orgID, podID: podID, status: "NOT_STARTED",
		feedbackEnabled:   req.FeedbackEnabled == nil || *req.FeedbackEnabled,
		subdomainsEnabled: req.SubdomainsEnabled != nil && *req.SubdomainsEnabled,
		trackingEnabled:   req.TrackingEnabled != nil && *req.TrackingEnabled,
		seq:               st.nextSeq(), createdAt: now, updatedAt: now,
	}
	st.domains[name] = d
	return domainWire(d), nil
}

func (c *call) updateDomain() (any, error) {
	var req struct {
		FeedbackEnabled   *bool `json:"feedback_enabled"`
		SubdomainsEnabled *bool `json:"subdomains_enabled"`
		TrackingEnabled   *bool `json:"tracking_enabled"`
	}
	if err := c.decode(&req, false); err != nil {
		return nil, err
	}
	if req.FeedbackEnabled == nil && req.SubdomainsEnabled == nil && req.TrackingEnabled == nil {
		return nil, errValidation("Provide at least one field to update")
	}
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	d, err := c.domainLocked()
	if err != nil {
		return nil, err
	}
	if req.FeedbackEnabled != nil {
		d.feedbackEnabled = *req.FeedbackEnabled
	}
	if req.TrackingEnabled != nil {
		d.trackingEnabled = *req.TrackingEnabled
	}
	if req.SubdomainsEnabled != nil {
		if *req.SubdomainsEnabled && !d.subdomainsEnabled && d.status == "VERIFIED" {
			d.status = "PENDING" // the wildcard MX record must be verified again
		}
		d.subdomainsEnabled = *req.SubdomainsEnabled
	}
	d.updatedAt = c.s.state.now()
	return domainWire(d), nil
}

func (c *call) deleteDomain() (any, error) {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	d, err := c.domainLocked()
	if err != nil {
		return nil, err
	}
	for _, ib := range c.s.state.inboxes {
		if dp := domainPart(ib.id); dp == d.name || strings.HasSuffix(dp, "."+d.name) {
			return nil, newAPIError(403, "ForbiddenError", "cannot_delete", "Domain still has inboxes", "Delete the domain's inboxes first.")
		}
	}
	delete(c.s.state.domains, d.name)
	return noContent{}, nil
}

// verifyDomain starts verification. DNS is not consulted: the domain stays
// VERIFYING until POST /_emulator/domains/{domain}/verify marks it VERIFIED.
func (c *call) verifyDomain() (any, error) {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	d, err := c.domainLocked()
	if err != nil {
		return nil, err
	}
	if d.status != "VERIFIED" {
		d.status = "VERIFYING"
		d.updatedAt = c.s.state.now()
	}
	return noContent{}, nil
}

func (c *call) zoneFile() (any, error) {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	d, err := c.domainLocked()
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "$ORIGIN %s.\n", d.name)
	for _, r := range domainRecords(d) {
		switch r.Type {
		case "MX":
			fmt.Fprintf(&b, "%s.\t3600\tIN\tMX\t%d %s.\n", r.Name, *r.Priority, r.Value)
		default:
			fmt.Fprintf(&b, "%s.\t3600\tIN\t%s\t%q\n", r.Name, r.Type, r.Value)
		}
	}
	return rawBody{contentType: "text/plain; charset=utf-8", data: []byte(b.String())}, nil
}

// verifyDomainLocked marks a domain VERIFIED and emits domain.verified.
func (s *Server) verifyDomainLocked(name string) (*domain, error) {
	d := s.state.domains[strings.ToLower(name)]
	if d == nil {
		return nil, fmt.Errorf("verify domain %s: %w", name, ErrNotFound)
	}
	if d.status == "VERIFIED" {
		return d, nil
	}
	d.status = "VERIFIED"
	d.updatedAt = s.state.now()
	s.publishLocked(s.newEvent(d.orgID, d.podID, "", evDomainVerified, map[string]any{"domain": domainWire(d)}))
	return d, nil
}
