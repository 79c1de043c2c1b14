package ui

import (
	"net/http"
	"strings"

	"github.com/google/uuid"

	"github.com/paperclipai/paperclipai/internal/apiclient"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/email"
)

func (u *UI) prepareReview(c *rc, w *wizard) {
	w.Address = w.State.address()
	if w.Cred != nil {
		w.ConnLabel = "AgentMail · " + w.Cred.Label
	} else {
		w.ConnLabel = "AgentMail"
	}
	switch {
	case w.Finish:
		w.CreateLabel = "Finish connecting"
	case w.State.Mode == "existing":
		w.CreateLabel = "Connect email address"
	default:
		w.CreateLabel = "Create email address"
	}
	if w.Cred != nil && w.Cred.Scope == "inbox" {
		w.OnlyExisting = true
	}
}

// wizardCreate handles step 3: create or attach the inbox with the
// request id as idempotency key, and maps the API's answer.
func (u *UI) wizardCreate(c *rc) {
	w, ok := u.postWizard(c)
	if !ok {
		return
	}
	w.Step = stepReview
	if w.Agent == nil || w.State.Connection == "" {
		c.redirect(w.URL(stepAgent), "")
		return
	}
	st := w.State
	body := email.SetupInput{AssignedAgentID: st.Agent, CredentialConnectionID: st.Connection,
		ReceiveMode: st.Receive, IdempotencyKey: w.RID}
	if r := c.form("sendReview"); r == "off" || r == "new_recipients" || r == "all" {
		body.SendReview = r
	}
	if st.Mode == "existing" {
		body.InboxID = st.Inbox
	} else {
		if !uiUsernameRE.MatchString(st.Username) {
			c.redirect(w.URL(stepAddress), "")
			return
		}
		body.Username, body.Domain = st.Username, st.Domain
		if st.Domain == "" {
			body.Domain = email.DefaultDomain
		}
	}
	ctx, cancel := c.longCtx()
	defer cancel()
	_, err := c.cl().SetupInbox(ctx, c.cid, body)
	e := uiError(err)
	c.dropInspect(st.Connection)
	if e == nil {
		c.redirect(w.Base+"/done", "")
		return
	}
	if emailDisabled(e) {
		c.failEmail(e)
		return
	}
	if e.Code == "agentmail_address_taken" {
		w.State.Taken = appendTaken(w.State.Taken, st.address())
		c.redirect(w.URL(stepAddress), "")
		return
	}
	if e.Status == http.StatusBadRequest && strings.Contains(e.Message, "Verify this custom domain") {
		w.Step = stepAddress
		w.FieldErr["domain"] = e.Message
		if u.prepareAddress(c, w) {
			c.renderWizard(e.Status, w)
		}
		return
	}
	// The failure may have left a draft with an address: show the review
	// in finish-setup mode then (the next try finishes that inbox).
	w2 := c.newWizard(w.RID, w.State)
	w2.Step = stepReview
	if !u.resume(c, w2) || !u.loadWizard(c, w2) {
		return
	}
	w2.Err = e
	switch {
	case e.Status == http.StatusConflict && strings.Contains(e.Message, "already running"):
		w2.ErrKind = "running"
	case e.Status == http.StatusConflict && strings.Contains(e.Message, "already has a Paperclip owner"):
		w2.ErrKind = "owner"
	case e.Status == http.StatusBadRequest && (strings.Contains(e.Message, "low-trust") || strings.Contains(e.Message, "sandbox")):
		w2.ErrKind = "gates"
	case e.Status == http.StatusForbidden:
		w2.ErrKind = "key"
	default:
		w2.ErrKind = "provider"
	}
	u.prepareReview(c, w2)
	c.renderWizard(e.Status, w2)
}

// wizardRestart mints a new request id to choose a different address or
// API key; an address-less draft of the old id is discarded first, a draft
// with an address is kept (its inbox stays in AgentMail and on the
// AgentMail page).
func (u *UI) wizardRestart(c *rc) {
	w, ok := u.postWizard(c)
	if !ok {
		return
	}
	if w.Draft != nil && w.Draft.Address == nil {
		ctx, cancel := c.longCtx()
		defer cancel()
		if _, err := c.cl().ControlInbox(ctx, w.RID, apiclient.ActionRemove); err != nil {
			e := uiError(err)
			w.Err = e
			w.Step = stepReview
			if !w.Finish {
				w.Step = stepAgent
			}
			w.AccessNote = c.accessNote(w)
			c.renderWizard(e.Status, w)
			return
		}
	}
	st := w.State
	st.Username, st.Inbox, st.Mode, st.AllowInboxKey = "", "", "new", false
	step := stepAddress
	if c.post("reason") == "key" {
		step = stepAgent
		st.Connection = ""
	}
	if w.Finish && w.Draft != nil && w.Draft.Address != nil {
		st.Taken = appendTaken(st.Taken, *w.Draft.Address)
	}
	c.redirect(c.agentmailPath("/setup/"+uuid.NewString()+"?"+st.query(step)), "")
}

type readyData struct {
	Inbox       inboxView
	Trust       string
	EmulatorCmd string
	Settings    string
}

// readyPage is the ready screen of an active setup.
func (u *UI) readyPage(c *rc) {
	rid, ok := c.setupRID()
	if !ok {
		return
	}
	ep, err := c.cl().Inbox(c.ctx(), rid)
	if e := c.check(err); e != nil {
		if e.Status == http.StatusNotFound {
			c.redirect(c.agentmailPath("/setup/"+rid), "")
			return
		}
		c.failEmail(e)
		return
	}
	if ep.CompanyID != c.cid {
		c.notFound()
		return
	}
	if ep.Status != domain.EndpointActive {
		c.redirect(c.agentmailPath("/setup/"+rid), "")
		return
	}
	_, idx, e := c.agents()
	if e != nil {
		c.fail(e)
		return
	}
	d := readyData{Inbox: newInboxView(ep, idx), Settings: c.agentmailPath("/inboxes/" + ep.ID + "/settings")}
	d.Trust = labelOr(trustLabels, idx[ep.AssignedAgentID].Permissions.TrustPreset)
	if d.Trust == "" {
		d.Trust = trustLabels[domain.TrustStandard]
	}
	if em := u.emulatorURL(); em != "" && ep.Address != nil {
		cmd := "paperclipai emulator send "
		if em != "http://127.0.0.1:3199" {
			cmd += "--url " + em + " "
		}
		d.EmulatorCmd = cmd + "--to " + *ep.Address + ` --from you@example.com --subject "Hello" --text "Can you help me?"`
	}
	c.render(http.StatusOK, "email_ready", view{Title: "Your agent’s email is ready", Nav: "apps",
		Crumbs: c.appsCrumbs(crumb{"AgentMail", c.agentmailPath("")}, crumb{"Email address setup", ""}), Data: d})
}
