package ui

import (
	"net/http"
	"slices"
	"strings"

	"github.com/google/uuid"

	"github.com/paperclipai/paperclipai/internal/apiclient"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/email"
)

// wizardAgent handles step 1: the agent and the credential. Its steps:
// read the choice (wizardChoice), check the agent (agentRefusal), find the
// key (wizardKey), ask the provider what it reaches (wizardInspect), stop
// at an inbox key not yet allowed (restrictInbox), save a new key
// (saveWizardKey), then go on to the address step.
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
	conn := c.wizardChoice(w)
	allow := c.post("allowInboxKey") == "1"
	if status, e := agentRefusal(w); e != nil {
		c.wizardAgentFail(w, status, e)
		return
	}
	key, e := c.wizardKey(w, conn, newKey)
	if e != nil {
		c.wizardAgentFail(w, e.Status, e)
		return
	}
	insp, e := c.wizardInspect(conn, key)
	if e != nil {
		if emailDisabled(e) {
			c.failEmail(e)
			return
		}
		c.wizardAgentFail(w, e.Status, e)
		return
	}
	inbox := inspectedInbox(insp)
	if insp.Scope == "inbox" && !allow {
		c.restrictInbox(w, inbox, key)
		return
	}
	rid := w.RID
	if key != "" {
		if rid, e = c.saveWizardKey(w, key, urlConn); e != nil {
			c.wizardAgentFail(w, e.Status, e)
			return
		}
	}
	w.State.AllowInboxKey = allow
	if insp.Scope == "inbox" {
		w.State.Mode, w.State.Inbox = "existing", inbox
	} else if w.State.Mode == "existing" && !slices.ContainsFunc(insp.Inboxes, func(i email.InboxInfo) bool { return strings.EqualFold(i.Email, w.State.Inbox) }) {
		w.State.Mode, w.State.Inbox = "new", ""
	}
	c.redirect(c.agentmailPath("/setup/"+rid+"?"+w.State.query(stepAddress)), "")
}

// wizardChoice applies the posted agent and saved credential to w (the
// draft's when locked) and returns the credential id ("" for a new key;
// an id the user may not use is dropped).
func (c *rc) wizardChoice(w *wizard) string {
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
	return conn
}

// wizardAgentFail shows step 1 again with e (nil: no error, as for the
// restricted-inbox question) and the chosen agent's trust notice.
func (c *rc) wizardAgentFail(w *wizard, status int, e *APIError) {
	w.Err = e
	if w.Agent != nil {
		ctx := c.ctx()
		sett, _ := c.cl().Settings(ctx)
		envs, _ := c.cl().Environments(ctx, c.cid)
		w.Trust = c.trustNoticeFor(*w.Agent, sett, envs, w.URL(stepAgent))
		w.NoBoundary = w.Trust.Preset == domain.TrustLowTrustReview && !w.Trust.HasBoundary
	}
	w.AccessNote = c.accessNote(w)
	c.renderWizard(status, w)
}

// agentRefusal refuses a missing agent, and a low-trust agent without a
// trust boundary (its email tasks would have nowhere to go).
func agentRefusal(w *wizard) (int, *APIError) {
	if w.Agent == nil {
		w.FieldErr["agent"] = msgSelectAgent
		return http.StatusBadRequest, &APIError{Status: http.StatusBadRequest, Message: msgSelectAgent}
	}
	if w.Agent.Permissions.TrustPreset == domain.TrustLowTrustReview {
		b := w.Agent.Permissions.Boundary()
		if b == nil || (len(b.ProjectIDs) == 0 && b.RootIssueID == "") {
			return http.StatusUnprocessableEntity, &APIError{Status: http.StatusUnprocessableEntity, Message: msgNeedsBoundaryEmail}
		}
	}
	return 0, nil
}

// wizardKey returns the new API key of a setup without a saved credential:
// pasted now, or sealed in the form by an earlier restricted-inbox answer.
// A setup with a credential (conn) has none.
func (c *rc) wizardKey(w *wizard, conn, newKey string) (string, *APIError) {
	if conn != "" {
		return "", nil
	}
	key := newKey
	if key == "" && c.post("keyHandle") != "" {
		k, err := c.u.openKey(c.cid, w.RID, c.actor.UserID, c.post("keyHandle"))
		if err != nil {
			w.FieldErr["newKey"] = msgPasteKeyAgain
			return "", &APIError{Status: http.StatusBadRequest, Message: msgPasteKeyAgain}
		}
		c.u.d.Redact(k)
		key = k
	}
	if key == "" {
		w.FieldErr["newKey"] = msgEnterAPIKey
		return "", &APIError{Status: http.StatusBadRequest, Message: msgEnterAPIKey}
	}
	return key, nil
}

// wizardInspect asks the provider what the saved credential or the new key
// reaches. Nothing is saved before the provider has seen a new key.
func (c *rc) wizardInspect(conn, key string) (email.InspectResult, *APIError) {
	if conn != "" {
		return c.inspectConn(conn)
	}
	ctx, cancel := c.longCtx()
	defer cancel()
	insp, err := c.cl().Inspect(ctx, c.cid, key)
	return insp, c.check(err)
}

// inspectedInbox is the address of an inbox-scoped key's inbox ("" for an
// organization key).
func inspectedInbox(insp email.InspectResult) string {
	if insp.Scope != "inbox" || len(insp.Inboxes) == 0 {
		return ""
	}
	if inbox := strings.ToLower(insp.Inboxes[0].Email); inbox != "" {
		return inbox
	}
	return strings.ToLower(insp.Inboxes[0].InboxID)
}

// restrictInbox asks before using an inbox key: whether another setup
// already has its inbox, and, for a new key, carries the key sealed in the
// form so it need not be pasted again.
func (c *rc) restrictInbox(w *wizard, inbox, key string) {
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
	c.wizardAgentFail(w, http.StatusOK, nil)
}

// saveWizardKey saves the new key as a credential for the chosen agent and
// returns the setup id to continue under. The credential's idempotency key
// is the setup's id unless this setup already had a credential (urlConn):
// the connect call returns the stored credential for a known key without
// vaulting the new one, so an account change needs a new request id (and
// the address-less draft of the old one goes).
func (c *rc) saveWizardKey(w *wizard, key, urlConn string) (string, *APIError) {
	ctx, cancel := c.longCtx()
	defer cancel()
	rid := w.RID
	idem := rid
	if urlConn != "" {
		rid = uuid.NewString()
		idem = rid
		if w.Draft != nil && w.Draft.Address == nil {
			if _, err := c.cl().ControlInbox(ctx, w.RID, apiclient.ActionRemove); err != nil {
				return "", c.check(err)
			}
		}
	}
	saved, err := c.cl().CreateConnection(ctx, c.cid, email.ConnectInput{APIKey: key, GrantKind: domain.GrantOrganization,
		AllAgents: false, AgentIDs: []string{w.Agent.ID}, IdempotencyKey: idem})
	if err != nil {
		return "", c.check(err)
	}
	w.State.Connection = saved.ID
	return rid, nil
}
