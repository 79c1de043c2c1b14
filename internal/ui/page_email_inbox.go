package ui

import (
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/paperclipai/paperclipai/internal/apiclient"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/email"
	"github.com/paperclipai/paperclipai/internal/outbound"
)

// E6 an email address's detail pages (Settings, Access, Conversations,
// Activity) and E7 its disconnect confirmation.

var inboxTabs = []string{"settings", "access", "conversations", "activity", "senders", "quarantine"}

type inboxData struct {
	Inbox       inboxView
	Tab         string
	Tabs        []string
	Base        string
	Manager     bool
	PollMS      int
	TrustHref   string
	ConsoleHref string
	NewSetup    string
	WebhookOK   bool

	// Send policy (settings tab).
	Policy    *outbound.SendPolicy
	PolicyErr *APIError

	// Settings actions.
	Err           *APIError
	ErrAction     string
	ReconnectOpen bool
	Unchanged     bool

	// Access.
	AccessState string // own | forbidden | error | ok
	Conn        domain.EmailConnection
	ConnLabel   string
	Access      accessFacts
	ConnHref    string

	// Conversations and activity.
	Convs    []email.ConversationSummary
	ConvErr  bool
	Activity email.InboxActivity
	ActErr   bool

	// Senders and Quarantine (page_email_quarantine.go).
	Inbound *inboundData
}

// TabLabel names a tab.
func (inboxData) TabLabel(t string) string {
	return strings.ToUpper(t[:1]) + t[1:]
}

// loadInbox reads the path's inbox of this company.
func (c *rc) loadInbox() (domain.EmailEndpointSummary, agentIndex, bool) {
	eid, ok := c.requirePathID("eid")
	if !ok {
		return domain.EmailEndpointSummary{}, nil, false
	}
	var (
		ib     domain.EmailEndpointSummary
		idx    agentIndex
		e1, e2 *APIError
	)
	parallel(
		func() { e1 = into(c, &ib)(c.cl().Inbox(c.ctx(), eid)) },
		func() { _, idx, e2 = c.agents() },
	)
	for _, e := range []*APIError{e1, e2} {
		if e != nil {
			c.failEmail(e)
			return ib, nil, false
		}
	}
	if ib.CompanyID != c.cid {
		c.notFound()
		return ib, nil, false
	}
	return ib, idx, true
}

func (u *UI) inboxRoot(c *rc) {
	eid, ok := c.requirePathID("eid")
	if !ok {
		return
	}
	c.redirect(c.agentmailPath("/inboxes/"+eid+"/settings"), "")
}

func (u *UI) newInboxData(c *rc, ib domain.EmailEndpointSummary, idx agentIndex, tab string) *inboxData {
	d := &inboxData{Inbox: newInboxView(ib, idx), Tab: tab, Tabs: inboxTabs, Base: c.agentmailPath("/inboxes/" + ib.ID),
		Manager: c.caps.Manager, PollMS: u.pollInterval(5000), WebhookOK: u.webhookAllowed(),
		NewSetup: c.agentmailPath("/setup?agent=" + ib.AssignedAgentID)}
	d.TrustHref = "/c/" + c.cid + "/agents/" + ib.AssignedAgentID + "/trust?return=" + url.QueryEscape(d.Base+"/settings")
	if a := d.Inbox.Addr(); a != "" {
		d.ConsoleHref = "https://console.agentmail.to/dashboard/inboxes/" + url.PathEscape(a)
	}
	d.ReconnectOpen = ib.LastError != nil && ib.Status == domain.EndpointActive
	return d
}

func (u *UI) inboxPage(c *rc) {
	tab := c.r.PathValue("tab")
	if tab != "disconnect" && !slices.Contains(inboxTabs, tab) {
		c.notFound()
		return
	}
	ib, idx, ok := c.loadInbox()
	if !ok {
		return
	}
	if tab == "disconnect" {
		u.renderDisconnect(c, http.StatusOK, u.newInboxData(c, ib, idx, tab))
		return
	}
	u.renderInbox(c, http.StatusOK, u.newInboxData(c, ib, idx, tab))
}

func (u *UI) renderInbox(c *rc, status int, d *inboxData) {
	switch d.Tab {
	case "settings":
		if d.Policy == nil {
			if p, err := c.cl().SendPolicy(c.ctx(), d.Inbox.ID); c.check(err) == nil {
				d.Policy = &p
			}
		}
	case "access":
		u.loadAccess(c, d)
	case "conversations":
		if _, e := page(c, c.cl().InboxConversations(d.Inbox.ID), apiclient.Query("limit", "200"), &d.Convs); e != nil {
			d.ConvErr = true
		}
	case "activity":
		if e := into(c, &d.Activity)(c.cl().InboxActivity(c.ctx(), d.Inbox.ID)); e != nil {
			d.ActErr = true
		}
	case "senders", "quarantine":
		u.loadInbound(c, d)
	}
	title := d.Inbox.Addr()
	if title == "" {
		title = "Email address"
	}
	c.render(status, "email_inbox", view{Title: title + " · " + d.TabLabel(d.Tab), Nav: emailNav,
		Crumbs: c.emailCrumbs(crumb{title, ""}), Data: d})
}

func (u *UI) loadAccess(c *rc, d *inboxData) {
	connID := d.Inbox.Conn()
	if connID == "" {
		d.AccessState = "own"
		return
	}
	e := into(c, &d.Conn)(c.cl().Connection(c.ctx(), c.cid, connID))
	switch {
	case e == nil:
		var members []domain.Membership
		_ = all(c, c.cl().Members(c.cid), nil, &members)
		_, idx, _ := c.agents()
		d.AccessState, d.Access, d.ConnLabel = "ok", c.describeAccess(d.Conn, idx, members), connLabel(d.Conn)
		d.ConnHref = c.agentmailPath("/connections/" + connID)
	case e.Status == http.StatusForbidden:
		d.AccessState = "forbidden"
	default:
		d.AccessState = "error"
	}
}

// inboxControl pauses or resumes an inbox from its settings.
func (u *UI) inboxControl(action string) func(c *rc) {
	return func(c *rc) {
		if !c.requireManager("change this inbox") {
			return
		}
		ib, idx, ok := c.loadInbox()
		if !ok {
			return
		}
		ctx, cancel := c.longCtx()
		defer cancel()
		_, err := c.cl().ControlInbox(ctx, ib.ID, action)
		if e := uiError(err); e != nil {
			if emailDisabled(e) || e.Status == http.StatusNotFound {
				c.failEmail(e)
				return
			}
			d := u.newInboxData(c, ib, idx, "settings")
			d.Err, d.ErrAction = e, action
			u.renderInbox(c, e.Status, d)
			return
		}
		msg := flashInboxPaused
		if action == "resume" {
			msg = flashInboxResumed
		}
		c.redirect(c.agentmailPath("/inboxes/"+ib.ID+"/settings"), msg)
	}
}

func (u *UI) inboxReconnect(c *rc) {
	key := strings.TrimSpace(c.form("apiKey"))
	if key != "" {
		c.u.d.Redact(key)
	}
	if !c.requireManager("change this inbox") {
		return
	}
	ib, idx, ok := c.loadInbox()
	if !ok {
		return
	}
	mode := c.form("receiveMode")
	d := u.newInboxData(c, ib, idx, "settings")
	d.ReconnectOpen, d.ErrAction = true, "reconnect"
	// The key is optional: without one the inbox reconnects with its saved
	// credential, so the receiving mode alone can change
	// (docs/email-setup.md, "7. Pause, resume, reconnect, disconnect").
	if key == "" && (mode == "" || mode == ib.ReceiveMode) {
		d.Err = &APIError{Status: http.StatusBadRequest, Message: msgReconnectNothing}
		u.renderInbox(c, http.StatusBadRequest, d)
		return
	}
	ctx, cancel := c.longCtx()
	defer cancel()
	_, err := c.cl().ReconnectInbox(ctx, ib.ID, email.ReconnectInput{ReceiveMode: mode, APIKey: key})
	e := uiError(err)
	if e == nil {
		c.redirect(c.agentmailPath("/inboxes/"+ib.ID+"/settings"), flashReconnected)
		return
	}
	if emailDisabled(e) || e.Status == http.StatusNotFound {
		c.failEmail(e)
		return
	}
	// Show the inbox as it is now; a refused reconnect leaves receiving as
	// it was, and the page says so.
	if now, err := c.cl().Inbox(c.ctx(), ib.ID); c.check(err) == nil {
		d2 := u.newInboxData(c, now, idx, "settings")
		d2.Unchanged = now.Status == ib.Status && now.ReceiveMode == ib.ReceiveMode
		d = d2
	}
	d.ReconnectOpen, d.ErrAction, d.Err = true, "reconnect", e
	u.renderInbox(c, e.Status, d)
}

func (u *UI) renderDisconnect(c *rc, status int, d *inboxData) {
	if !c.requireManager("disconnect this inbox") {
		return
	}
	d.Tab = "disconnect"
	title := d.Inbox.Addr()
	if title == "" {
		title = "Email address"
	}
	c.render(status, "email_disconnect", view{Title: "Disconnect " + title, Nav: emailNav,
		Crumbs: c.emailCrumbs(crumb{title, d.Base + "/settings"}, crumb{"Disconnect", ""}), Data: d})
}

func (u *UI) inboxDisconnect(c *rc) {
	if !c.requireManager("disconnect this inbox") {
		return
	}
	ib, idx, ok := c.loadInbox()
	if !ok {
		return
	}
	ctx, cancel := c.longCtx()
	defer cancel()
	out, err := c.cl().ControlInbox(ctx, ib.ID, apiclient.ActionRemove)
	if e := uiError(err); e != nil {
		if emailDisabled(e) || e.Status == http.StatusNotFound {
			c.failEmail(e)
			return
		}
		d := u.newInboxData(c, ib, idx, "disconnect")
		d.Err = e
		u.renderDisconnect(c, e.Status, d)
		return
	}
	msg := flashDisconnected
	if out.LastError != nil {
		msg = msgCleanupFailed
	}
	c.redirect(c.agentmailPath("/inboxes/"+ib.ID+"/settings"), msg)
}
