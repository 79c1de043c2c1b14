package ui

import (
	"net/http"
	"slices"
	"strings"

	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/email"
)

// inspectConn is what a saved credential can reach, cached for a minute
// per company, credential and user (the address step renders it often).
func (c *rc) inspectConn(connID string) (email.InspectResult, *APIError) {
	key := c.cid + "|" + connID + "|" + c.actor.UserID
	s := &c.u.email
	s.mu.Lock()
	if en, ok := s.inspect[key]; ok && c.u.now().Sub(en.at) < inspectTTL {
		s.mu.Unlock()
		return en.res, nil
	}
	s.mu.Unlock()
	ctx, cancel := c.longCtx()
	defer cancel()
	res, err := c.cl().InspectConnection(ctx, c.cid, connID)
	if e := uiError(err); e != nil {
		return res, e
	}
	s.mu.Lock()
	if s.inspect == nil || len(s.inspect) > 1000 {
		s.inspect = map[string]inspectEntry{}
	}
	s.inspect[key] = inspectEntry{at: c.u.now(), res: res}
	s.mu.Unlock()
	return res, nil
}

// dropInspect forgets cached inspections of a credential (after any setup
// POST, which may have created an inbox).
func (c *rc) dropInspect(connID string) {
	s := &c.u.email
	s.mu.Lock()
	defer s.mu.Unlock()
	for k := range s.inspect {
		if strings.HasPrefix(k, c.cid+"|"+connID+"|") {
			delete(s.inspect, k)
		}
	}
}

// prepareAddress loads what the address step shows: the credential's
// inboxes and verified domains, which inboxes are assigned, and the
// address check of the current username.
func (u *UI) prepareAddress(c *rc, w *wizard) bool {
	var (
		insp    email.InspectResult
		e1      *APIError
		inboxes []domain.EmailEndpointSummary
	)
	parallel(
		func() { insp, e1 = c.inspectConn(w.State.Connection) },
		func() { inboxes, _ = c.allInboxes() },
	)
	if e1 != nil {
		if emailDisabled(e1) {
			c.failEmail(e1)
			return false
		}
		// The credential cannot be inspected now: back to step 1 with the
		// provider's diagnostics.
		w.Step, w.Err = stepAgent, e1
		w.AccessNote = c.accessNote(w)
		return true
	}
	assigned := map[string]bool{}
	for _, ib := range inboxes {
		if ib.Status != domain.EndpointArchived && ib.Address != nil && ib.ID != w.RID {
			assigned[strings.ToLower(*ib.Address)] = true
		}
	}
	for _, d := range insp.Domains {
		if strings.EqualFold(d.Status, "VERIFIED") {
			w.Domains = append(w.Domains, strings.ToLower(d.Domain))
		}
	}
	w.Domains = append(w.Domains, email.DefaultDomain)
	if w.State.Domain == "" || !slices.Contains(w.Domains, w.State.Domain) {
		w.State.Domain = w.Domains[0]
	}
	for _, in := range insp.Inboxes {
		addr := strings.ToLower(in.Email)
		if addr == "" {
			addr = strings.ToLower(in.InboxID)
		}
		w.Existing = append(w.Existing, existingInbox{Address: addr, Assigned: assigned[addr]})
	}
	if insp.Scope == "inbox" {
		w.OnlyExisting = true
		w.State.Mode = "existing"
		if len(w.Existing) > 0 {
			w.State.Inbox = w.Existing[0].Address
		}
	}
	if w.State.Mode == "new" && w.State.Username == "" && w.Agent != nil && !w.keepUsername {
		w.State.Username = defaultUsername(w.Agent.Name)
	}
	if w.Trust != nil && w.Trust.Preset == domain.TrustLowTrustReview {
		w.TrustSummary = "Low-trust review configured"
	} else {
		w.TrustSummary = "Manage which tasks and tools this agent can access."
	}
	if w.State.Mode == "new" && w.Check.Status == "" {
		w.Check = knownCheck(w, insp)
	}
	return true
}

// known reports whether addr is known to be taken: visible in the
// credential's account, or refused by an earlier create of this setup.
func knownTaken(w *wizard, insp email.InspectResult, addr string) bool {
	if slices.Contains(w.State.Taken, addr) {
		return true
	}
	for _, in := range insp.Inboxes {
		if strings.EqualFold(in.Email, addr) || strings.EqualFold(in.InboxID, addr) {
			return true
		}
	}
	return false
}

// knownCheck is the address check that needs no request: taken when
// known, else the "unknown" answer (the cached inspection is the same
// listing the check-address call makes).
func knownCheck(w *wizard, insp email.InspectResult) addressCheck {
	u := w.State.Username
	if u == "" {
		return addressCheck{}
	}
	if !uiUsernameRE.MatchString(u) {
		return addressCheck{Status: "invalid", Message: msgUsernameRule}
	}
	addr := u + "@" + w.State.Domain
	if knownTaken(w, insp, addr) {
		return takenCheck(w, insp, addr)
	}
	return addressCheck{Status: "unknown", Address: addr, Message: msgAddressUnknown}
}

func takenCheck(w *wizard, insp email.InspectResult, addr string) addressCheck {
	return addressCheck{Status: "taken", Address: addr, Message: msgAddressTaken,
		Suggestions: suggestions(w.State.Username, w.State.Domain, w.RID, func(a string) bool { return knownTaken(w, insp, a) })}
}

// wizardAddress handles step 2: validates the address and moves to review.
func (u *UI) wizardAddress(c *rc) {
	w, ok := u.postWizard(c)
	if !ok {
		return
	}
	w.Step = stepAddress
	if w.Finish {
		c.redirect(w.URL(stepReview), "")
		return
	}
	if w.Agent == nil || w.State.Connection == "" {
		c.redirect(w.URL(stepAgent), "")
		return
	}
	st := &w.State
	if m := c.post("mode"); m == "existing" || m == "new" {
		st.Mode = m
	}
	st.Username = strings.ToLower(c.post("username"))
	st.Domain = strings.ToLower(c.post("domain"))
	st.Inbox = strings.ToLower(c.post("inbox"))
	if r := c.post("receive"); r == domain.ReceiveWebhook || r == domain.ReceiveWebSocket {
		st.Receive = r
	}
	// The typed username is kept, even when empty (no suggestion then).
	w.keepUsername = true
	offered := w.State.Domain
	if !u.prepareAddress(c, w) {
		return
	}
	if w.Step == stepAgent {
		c.renderWizard(w.Err.Status, w)
		return
	}
	status := http.StatusUnprocessableEntity
	if st.Receive == domain.ReceiveWebhook && !w.WebhookOK {
		w.FieldErr["receive"] = msgWebhookNeedsHTTPS
		status = http.StatusBadRequest
	}
	if st.Mode == "existing" {
		i := slices.IndexFunc(w.Existing, func(x existingInbox) bool { return x.Address == st.Inbox })
		switch {
		case i < 0:
			w.FieldErr["inbox"] = msgChooseInbox
		case w.Existing[i].Assigned:
			w.FieldErr["inbox"] = msgInboxAssigned
		}
	} else {
		if offered != "" && !slices.Contains(w.Domains, offered) {
			w.FieldErr["domain"] = msgDomainNotOffered
		}
		switch {
		case st.Username == "" || len(st.Username) > 64 || !uiUsernameRE.MatchString(st.Username):
			w.FieldErr["username"] = msgUsernameRule
			w.Check = addressCheck{Status: "invalid", Message: msgUsernameRule}
		case w.Check.Status == "taken":
			w.FieldErr["username"] = msgAddressTaken
		default:
			// Without JavaScript this is the only check before review; it
			// never blocks on a failed lookup.
			res, e := c.checkAddress(st.Connection, st.Username, st.Domain)
			if e == nil && res.Status == "taken" {
				w.State.Taken = appendTaken(w.State.Taken, res.Address)
				w.Check = addressCheck{Status: "taken", Address: res.Address, Message: msgAddressTaken,
					Suggestions: suggestions(st.Username, st.Domain, w.RID, func(a string) bool { return slices.Contains(w.State.Taken, a) })}
				w.FieldErr["username"] = msgAddressTaken
			}
		}
	}
	if len(w.FieldErr) > 0 {
		if w.FieldErr["username"] == msgAddressTaken {
			status = http.StatusConflict
		}
		c.renderWizard(status, w)
		return
	}
	c.redirect(w.URL(stepReview), "")
}

// wizardCheck answers the address step's live check (JavaScript): the
// check fragment for the posted username and domain.
func (u *UI) wizardCheck(c *rc) {
	rid, ok := c.setupRID()
	if !ok {
		return
	}
	_ = c.r.ParseForm()
	w := c.newWizard(rid, readWizState(c.r.URL.Query()))
	w.State.Username = strings.ToLower(c.post("username"))
	w.State.Domain = strings.ToLower(c.post("domain"))
	if w.State.Domain == "" {
		w.State.Domain = email.DefaultDomain
	}
	switch {
	case w.State.Connection == "":
		w.Check = addressCheck{Status: "error", Message: "Could not check this address. Choose an API key first."}
	case w.State.Username == "":
		w.Check = addressCheck{}
	case len(w.State.Username) > 64 || !uiUsernameRE.MatchString(w.State.Username):
		w.Check = addressCheck{Status: "invalid", Message: msgUsernameRule}
	default:
		insp, e := c.inspectConn(w.State.Connection)
		addr := w.State.Username + "@" + w.State.Domain
		if e == nil && knownTaken(w, insp, addr) {
			w.Check = takenCheck(w, insp, addr)
			break
		}
		var res email.AddressCheck
		res, e = c.checkAddress(w.State.Connection, w.State.Username, w.State.Domain)
		switch {
		case e != nil:
			// A failed lookup never marks the address taken nor blocks.
			w.Check = addressCheck{Status: "error", Address: addr, Message: "Could not check this address. " + e.Message}
		case res.Status == "taken":
			w.State.Taken = appendTaken(w.State.Taken, res.Address)
			w.Check = takenCheck(w, insp, res.Address)
		default:
			w.Check = addressCheck{Status: "unknown", Address: res.Address, Message: msgAddressUnknown}
		}
	}
	c.partial("email_wizard", "frag-address-check", view{Data: w})
}

// checkAddress asks the provider, with the saved credential connID,
// whether username@domain is taken.
func (c *rc) checkAddress(connID, username, domainName string) (email.AddressCheck, *APIError) {
	ctx, cancel := c.longCtx()
	defer cancel()
	res, err := c.cl().CheckAddress(ctx, c.cid, connID, username, domainName)
	return res, uiError(err)
}
