package ui

import (
	"net/http"

	"github.com/paperclipai/paperclipai/internal/apiclient"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/email"
)

// E1 Apps and E2 AgentMail.

type appsData struct {
	Disabled    bool
	CanEnable   bool
	Connections int
	Inboxes     int
	Attention   int
	Manager     bool
}

func (c *rc) appsCrumbs(rest ...crumb) []crumb {
	return append([]crumb{{"Apps", "/c/" + c.cid + "/apps"}}, rest...)
}

// renderEmailDisabled shows the email-disabled state (E1) with status.
func (c *rc) renderEmailDisabled(status int) {
	d := appsData{Disabled: true, CanEnable: c.caps.InstanceAdmin}
	c.render(status, "email_apps", view{Title: "Apps", Nav: "apps", Data: d})
}

func (u *UI) appsPage(c *rc) {
	settings, err := c.cl().Settings(c.ctx())
	if e := c.check(err); e != nil {
		c.fail(e)
		return
	}
	if !settings.Experimental.EnableChatConnectors {
		c.renderEmailDisabled(http.StatusOK)
		return
	}
	d := appsData{Manager: c.caps.Manager}
	var (
		inboxes  []domain.EmailEndpointSummary
		conns    []email.CredentialOption
		e1, e2   *APIError
		managers = c.caps.Manager
	)
	parallel(
		func() { e1 = all(c, c.cl().Inboxes(c.cid), nil, &inboxes) },
		func() {
			if managers {
				// Non-managers get 403 here; that is not an error for this page.
				e2 = into(c, &conns)(c.cl().Connections(c.ctx(), c.cid))
			}
		},
	)
	if e1 != nil {
		c.failEmail(e1)
		return
	}
	if e2 != nil && e2.Status != http.StatusForbidden {
		c.failEmail(e2)
		return
	}
	d.Connections = len(conns)
	for _, ib := range inboxes {
		d.Inboxes++
		if ib.Status != domain.EndpointActive || ib.LastError != nil {
			d.Attention++
		}
	}
	c.render(http.StatusOK, "email_apps", view{Title: "Apps", Nav: "apps", Data: d})
}

func (u *UI) enableEmail(c *rc) {
	on := true
	if _, err := c.cl().PatchSettings(c.ctx(), apiclient.SettingsPatch{Experimental: &apiclient.ExperimentalPatch{EnableChatConnectors: &on}}); err != nil {
		e := c.check(err)
		c.fail(e)
		return
	}
	c.redirect("/c/"+c.cid+"/apps", flashEmailEnabled)
}

type agentmailData struct {
	Manager     bool
	Connections []connRow
	Active      []inboxView
	Archived    []inboxView
	CanGive     bool
	ConnErr     *APIError
	PollMS      int
	Path        string
}

type connRow struct {
	email.CredentialOption
	InboxCount int
}

// ScopeText is the credential’s scope label.
func (r connRow) ScopeText() string {
	inbox := ""
	if r.InboxID != nil {
		inbox = *r.InboxID
	}
	return scopeLabel(r.Scope, inbox)
}

func (u *UI) agentmailPage(c *rc) {
	d := agentmailData{Manager: c.caps.Manager, PollMS: u.pollInterval(10000), Path: c.agentmailPath("")}
	var (
		inboxes []domain.EmailEndpointSummary
		conns   []email.CredentialOption
		agents  []domain.Agent
		idx     agentIndex
		e1, e2  *APIError
		e3      *APIError
	)
	parallel(
		func() { inboxes, e1 = c.allInboxes() },
		func() {
			if d.Manager {
				e2 = into(c, &conns)(c.cl().Connections(c.ctx(), c.cid))
			}
		},
		func() { agents, idx, e3 = c.agents() },
	)
	for _, e := range []*APIError{e1, e3} {
		if e != nil {
			c.failEmail(e)
			return
		}
	}
	if e2 != nil {
		if emailDisabled(e2) {
			c.failEmail(e2)
			return
		}
		d.ConnErr = e2
	}
	count := map[string]int{}
	for _, ib := range inboxes {
		v := newInboxView(ib, idx)
		if ib.Status == domain.EndpointArchived {
			d.Archived = append(d.Archived, v)
			continue
		}
		d.Active = append(d.Active, v)
		if ib.CredentialConnectionID != nil {
			count[*ib.CredentialConnectionID]++
		}
	}
	for _, o := range conns {
		d.Connections = append(d.Connections, connRow{CredentialOption: o, InboxCount: count[o.ID]})
	}
	d.CanGive = len(eligibleAgents(agents)) > 0
	c.render(http.StatusOK, "email_agentmail", view{Title: "AgentMail", Nav: "apps",
		Crumbs: c.appsCrumbs(crumb{"AgentMail", ""}), Data: d})
}

// discardInbox removes an unfinished setup (a draft) from the AgentMail page.
func (u *UI) discardInbox(c *rc) {
	eid, ok := c.requirePathID("eid")
	if !ok {
		return
	}
	ib, err := c.cl().Inbox(c.ctx(), eid)
	if e := c.check(err); e != nil {
		c.failEmail(e)
		return
	}
	if ib.CompanyID != c.cid {
		c.notFound()
		return
	}
	if ib.Status != domain.EndpointDraft {
		c.errorPage(http.StatusConflict, "Only an unfinished setup can be discarded.")
		return
	}
	ctx, cancel := c.longCtx()
	defer cancel()
	if _, err := c.cl().ControlInbox(ctx, eid, apiclient.ActionRemove); err != nil {
		c.failEmail(uiError(err))
		return
	}
	c.redirect(c.agentmailPath(""), flashDiscarded)
}
