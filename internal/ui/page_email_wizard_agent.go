package ui

import (
	"net/http"
	"slices"
	"strings"

	"github.com/google/uuid"

	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/email"
)

// wizardAgent handles step 1: the agent and the credential.
func (u *UI) wizardAgent(c *rc) {
	newKey := c.post("newKey")
	if newKey != "" {
		c.u.d.Redact(newKey)
	}
	w, ok := u.postWizard(c)
	if !ok {
		return
	}
	urlConn := w.State.Connection
	agentID := c.post("agent")
	if w.Locked {
		agentID = w.State.Agent
	}
	w.Step = stepAgent
	w.State.Agent = agentID
	w.Agent = nil
	for i := range w.Agents {
		if w.Agents[i].ID == agentID {
			w.Agent = &w.Agents[i]
		}
	}
	conn := c.post("connection")
	if w.ConnLock {
		conn = urlConn
	}
	w.State.Connection = conn
	w.Cred = nil
	for i := range w.Creds {
		if w.Creds[i].ID == conn {
			w.Cred = &w.Creds[i]
		}
	}
	if conn != "" && w.Cred == nil {
		w.State.Connection = ""
		conn = ""
	}
	allow := c.post("allowInboxKey") == "1"
	fail := func(status int, e *APIError) {
		w.Err = e
		if w.Agent != nil {
			var sett domain.InstanceSettings
			var envs []domain.Environment
			_ = c.api("GET", "/instance/settings", nil, &sett)
			_ = c.api("GET", "/companies/"+c.cid+"/environments", nil, &envs)
			w.Trust = c.trustNoticeFor(*w.Agent, sett, envs, w.URL(stepAgent))
			w.NoBoundary = w.Trust.Preset == domain.TrustLowTrustReview && !w.Trust.HasBoundary
		}
		w.AccessNote = c.accessNote(w)
		c.renderWizard(status, w)
	}
	if w.Agent == nil {
		w.FieldErr["agent"] = msgSelectAgent
		fail(http.StatusBadRequest, &APIError{Status: http.StatusBadRequest, Message: msgSelectAgent})
		return
	}
	if w.Agent.Permissions.TrustPreset == domain.TrustLowTrustReview {
		b := w.Agent.Permissions.Boundary()
		if b == nil || (len(b.ProjectIDs) == 0 && b.RootIssueID == "") {
			fail(http.StatusUnprocessableEntity, &APIError{Status: http.StatusUnprocessableEntity, Message: msgNeedsBoundaryEmail})
			return
		}
	}
	key := ""
	if conn == "" {
		key = newKey
		if key == "" && c.post("keyHandle") != "" {
			k, err := c.u.openKey(c.cid, w.RID, c.actor.UserID, c.post("keyHandle"))
			if err != nil {
				w.FieldErr["newKey"] = msgPasteKeyAgain
				fail(http.StatusBadRequest, &APIError{Status: http.StatusBadRequest, Message: msgPasteKeyAgain})
				return
			}
			c.u.d.Redact(k)
			key = k
		}
		if key == "" {
			w.FieldErr["newKey"] = msgEnterAPIKey
			fail(http.StatusBadRequest, &APIError{Status: http.StatusBadRequest, Message: msgEnterAPIKey})
			return
		}
	}
	var insp email.InspectResult
	var e *APIError
	if conn != "" {
		insp, e = c.inspectConn(conn)
	} else {
		// Nothing is saved before the provider has seen the key.
		e = c.apiLong("POST", "/companies/"+c.cid+"/email/inspect", map[string]string{"apiKey": key}, &insp)
	}
	if e != nil {
		if emailDisabled(e) {
			c.failEmail(e)
			return
		}
		fail(e.Status, e)
		return
	}
	inbox := ""
	if insp.Scope == "inbox" && len(insp.Inboxes) > 0 {
		inbox = strings.ToLower(insp.Inboxes[0].Email)
		if inbox == "" {
			inbox = strings.ToLower(insp.Inboxes[0].InboxID)
		}
	}
	if insp.Scope == "inbox" && !allow {
		r := &restrictedInbox{Inbox: inbox}
		if all, e := c.allInboxes(); e == nil {
			for _, ib := range all {
				if ib.Status != domain.EndpointArchived && ib.Address != nil && strings.EqualFold(*ib.Address, inbox) && ib.ID != w.RID {
					r.Assigned = true
				}
			}
		}
		if key != "" && !r.Assigned {
			h, err := c.u.sealKey(c.cid, w.RID, c.actor.UserID, key)
			if err != nil {
				c.errorPage(http.StatusInternalServerError, msgSomethingWrong)
				return
			}
			r.KeyHandle = h
		}
		w.Restricted = r
		fail(http.StatusOK, nil)
		return
	}
	rid := w.RID
	if key != "" {
		// Save the new key as a credential. Its idempotency key is the
		// setup's id unless this setup already had a credential: the
		// connect call returns the stored credential for a known key
		// without vaulting the new one, so an account change needs a new
		// request id (and the address-less draft of the old one goes).
		idem := rid
		if urlConn != "" {
			rid = uuid.NewString()
			idem = rid
			if w.Draft != nil && w.Draft.Address == nil {
				if e := c.apiLong("POST", "/email/inboxes/"+w.RID+"/control", map[string]string{"action": "remove"}, nil); e != nil {
					fail(e.Status, e)
					return
				}
			}
		}
		var saved domain.EmailConnection
		body := map[string]any{"apiKey": key, "grantKind": domain.GrantOrganization, "allAgents": false,
			"agentIds": []string{w.Agent.ID}, "idempotencyKey": idem}
		if e := c.apiLong("POST", "/companies/"+c.cid+"/email/connections", body, &saved); e != nil {
			fail(e.Status, e)
			return
		}
		w.State.Connection = saved.ID
	}
	w.State.AllowInboxKey = allow
	if insp.Scope == "inbox" {
		w.State.Mode, w.State.Inbox = "existing", inbox
	} else if w.State.Mode == "existing" && !slices.ContainsFunc(insp.Inboxes, func(i email.InboxInfo) bool { return strings.EqualFold(i.Email, w.State.Inbox) }) {
		w.State.Mode, w.State.Inbox = "new", ""
	}
	c.redirect(c.agentmailPath("/setup/"+rid+"?"+w.State.query(stepAddress)), "")
}
