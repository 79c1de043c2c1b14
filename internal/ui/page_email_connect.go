package ui

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/google/uuid"

	"github.com/paperclipai/paperclipai/internal/apiclient"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/email"
	"github.com/paperclipai/paperclipai/internal/store"
)

// E3 Connect AgentMail (Access → API key → Connected) and E4 Permissions.

// connectForm is the non-secret state of the connect flow (in the URL of
// the key step, in hidden fields of its form).
type connectForm struct {
	Grant  string // organization | user
	Agents string // specific | all
	IDs    []string
	Name   string
	Idem   string
}

func readConnectForm(v url.Values) connectForm {
	f := connectForm{Grant: v.Get("grant"), Agents: v.Get("agents"), Name: strings.TrimSpace(v.Get("name")), Idem: v.Get("idempotencyKey")}
	if f.Grant != domain.GrantUser {
		f.Grant = domain.GrantOrganization
	}
	if f.Agents != "all" {
		f.Agents = "specific"
	}
	for _, id := range v["agent"] {
		if store.ValidID(id) {
			f.IDs = append(f.IDs, id)
		}
	}
	if len(f.Name) > 200 {
		f.Name = f.Name[:200]
	}
	return f
}

// Query is the key step's URL query.
func (f connectForm) Query() string {
	q := url.Values{"grant": {f.Grant}, "agents": {f.Agents}}
	if f.Agents == "specific" {
		q["agent"] = f.IDs
	}
	if f.Name != "" {
		q.Set("name", f.Name)
	}
	return q.Encode()
}

// Has reports whether agent id is selected.
func (f connectForm) Has(id string) bool {
	for _, v := range f.IDs {
		if v == id {
			return true
		}
	}
	return false
}

type stepsNav struct {
	Steps   []string
	Current int
	Links   []string
}

type connectData struct {
	Step   int // 0 access, 1 key, 2 connected
	Steps  stepsNav
	Form   connectForm
	Agents []domain.Agent
	Err    *APIError
	// Connected step.
	Conn      domain.EmailConnection
	Access    accessFacts
	ScopeFact string
	Inboxes   []inboxView
}

func (c *rc) connectSteps(cur int, f connectForm) stepsNav {
	return stepsNav{Steps: []string{"Access", "API key", "Connected"}, Current: cur,
		Links: []string{c.agentmailPath("/connect?" + f.Query()), "", ""}}
}

func (c *rc) renderConnect(status int, d connectData) {
	d.Steps = c.connectSteps(d.Step, d.Form)
	c.render(status, "email_connect", view{Title: "Connect AgentMail", Nav: "apps",
		Crumbs: c.appsCrumbs(crumb{"AgentMail", c.agentmailPath("")}, crumb{"Connect", ""}), Data: d})
}

func (u *UI) connectAccessPage(c *rc) {
	if !c.requireManager("connect AgentMail") {
		return
	}
	list, _, e := c.agents()
	if e != nil {
		c.failEmail(e)
		return
	}
	f := readConnectForm(c.r.URL.Query())
	if a := c.r.URL.Query().Get("agent"); a != "" && len(f.IDs) == 0 && store.ValidID(a) {
		f.IDs = []string{a}
	}
	c.renderConnect(http.StatusOK, connectData{Step: 0, Form: f, Agents: eligibleAgents(list)})
}

func (u *UI) connectKeyPage(c *rc) {
	if !c.requireManager("connect AgentMail") {
		return
	}
	f := readConnectForm(c.r.URL.Query())
	f.Idem = uuid.NewString()
	list, _, e := c.agents()
	if e != nil {
		c.failEmail(e)
		return
	}
	c.renderConnect(http.StatusOK, connectData{Step: 1, Form: f, Agents: eligibleAgents(list)})
}

func (u *UI) connectSubmit(c *rc) {
	if !c.requireManager("connect AgentMail") {
		return
	}
	_ = c.r.ParseForm()
	f := readConnectForm(c.r.PostForm)
	if !store.ValidID(f.Idem) {
		f.Idem = uuid.NewString()
	}
	key := strings.TrimSpace(c.form("apiKey"))
	if key != "" {
		c.u.d.Redact(key)
	}
	d := connectData{Step: 1, Form: f}
	// again shows the form with e; only then are the agents needed.
	again := func(e *APIError) {
		if list, _, le := c.agents(); le == nil {
			d.Agents = eligibleAgents(list)
		}
		d.Err = e
		c.renderConnect(e.Status, d)
	}
	if key == "" {
		again(&APIError{Status: http.StatusBadRequest, Message: msgEnterAPIKey})
		return
	}
	body := email.ConnectInput{APIKey: key, GrantKind: f.Grant, AllAgents: f.Agents == "all", AgentIDs: []string{},
		IdempotencyKey: f.Idem, Name: f.Name}
	if f.Agents == "specific" {
		body.AgentIDs = f.IDs
	}
	ctx, cancel := c.longCtx()
	defer cancel()
	conn, err := c.cl().CreateConnection(ctx, c.cid, body)
	if e := uiError(err); e != nil {
		if emailDisabled(e) {
			c.failEmail(e)
			return
		}
		// The key field is rendered empty; the idempotency key stays, so a
		// retry that did save returns the same connection.
		again(e)
		return
	}
	c.redirect(c.agentmailPath("/connections/"+conn.ID+"/connected"), "")
}

// managedConnection is loadConnection for a manager of AgentMail
// connections (it answers, and returns false, for anyone else).
func (c *rc) managedConnection() (domain.EmailConnection, bool) {
	if !c.requireManager("manage AgentMail connections") {
		return domain.EmailConnection{}, false
	}
	return c.loadConnection()
}

// loadConnection reads the path's saved credential with its access.
func (c *rc) loadConnection() (domain.EmailConnection, bool) {
	id, ok := c.requirePathID("conn")
	if !ok {
		return domain.EmailConnection{}, false
	}
	conn, err := c.cl().Connection(c.ctx(), c.cid, id)
	if e := c.check(err); e != nil {
		switch {
		case emailDisabled(e):
			c.failEmail(e)
		case e.Status == http.StatusForbidden:
			c.errorPage(http.StatusForbidden, msgNoCredentialAccess)
		default:
			c.fail(e)
		}
		return conn, false
	}
	return conn, true
}

// connectionInboxes are the non-archived inboxes set up from a credential.
func connectionInboxes(all []domain.EmailEndpointSummary, connID string, idx agentIndex) []inboxView {
	var out []inboxView
	for _, ib := range all {
		if ib.Status != domain.EndpointArchived && ib.CredentialConnectionID != nil && *ib.CredentialConnectionID == connID {
			out = append(out, newInboxView(ib, idx))
		}
	}
	return out
}

func (u *UI) connectedPage(c *rc) {
	if !c.requireManager("see AgentMail connections") {
		return
	}
	conn, ok := c.loadConnection()
	if !ok {
		return
	}
	var (
		idx     agentIndex
		members []domain.Membership
		inboxes []domain.EmailEndpointSummary
		insp    email.InspectResult
		ie      *APIError
	)
	parallel(
		func() { _, idx, _ = c.agents() },
		func() { _ = all(c, c.cl().Members(c.cid), nil, &members) },
		func() { inboxes, _ = c.allInboxes() },
		func() {
			ctx, cancel := c.longCtx()
			defer cancel()
			var err error
			insp, err = c.cl().InspectConnection(ctx, c.cid, conn.ID)
			ie = uiError(err)
		},
	)
	d := connectData{Step: 2, Conn: conn, Access: c.describeAccess(conn, idx, members), Inboxes: connectionInboxes(inboxes, conn.ID, idx)}
	d.ScopeFact = scopeLabel(conn.Scope, conn.InboxID)
	if ie == nil {
		d.ScopeFact = scopeFact(insp)
	}
	c.renderConnect(http.StatusOK, d)
}

// scopeFact is "Organization key · 3 inboxes · verified domains: …".
func scopeFact(in email.InspectResult) string {
	inbox := ""
	if in.Scope == "inbox" && len(in.Inboxes) == 1 {
		inbox = in.Inboxes[0].Email
	}
	s := scopeLabel(in.Scope, inbox)
	if in.Scope != "inbox" {
		n := len(in.Inboxes)
		if n == 1 {
			s += " · 1 inbox"
		} else {
			s += " · " + strconv.Itoa(n) + " inboxes"
		}
		var doms []string
		for _, d := range in.Domains {
			if strings.EqualFold(d.Status, "VERIFIED") {
				doms = append(doms, d.Domain)
			}
		}
		if len(doms) > 0 {
			s += " · verified domains: " + strings.Join(doms, ", ")
		}
	}
	return s
}

type permissionsData struct {
	Conn      domain.EmailConnection
	Label     string
	Access    accessFacts
	Inboxes   []inboxView
	Agents    []domain.Agent
	AgentIdx  agentIndex
	Members   []domain.Membership
	Grants    []grantRow
	Installs  []installRow
	PollMS    int
	Path      string
	TrustHref map[string]string
	HasAny    bool // a company install exists
	HasOrg    bool // an active organization grant exists
}

type grantRow struct {
	ID, Text string
}

type installRow struct {
	ID, Text string
}

func (u *UI) permissionsPage(c *rc) {
	conn, ok := c.managedConnection()
	if !ok {
		return
	}
	var (
		agents  []domain.Agent
		idx     agentIndex
		members []domain.Membership
		inboxes []domain.EmailEndpointSummary
		e1      *APIError
	)
	parallel(
		func() { agents, idx, e1 = c.agents() },
		func() { _ = all(c, c.cl().Members(c.cid), nil, &members) },
		func() { inboxes, _ = c.allInboxes() },
	)
	if e1 != nil {
		c.fail(e1)
		return
	}
	d := permissionsData{Conn: conn, Label: connLabel(conn), Access: c.describeAccess(conn, idx, members),
		Inboxes: connectionInboxes(inboxes, conn.ID, idx), Agents: eligibleAgents(agents), AgentIdx: idx, Members: members,
		PollMS: u.pollInterval(10000), Path: c.agentmailPath("/connections/" + conn.ID), TrustHref: map[string]string{}}
	emails := map[string]string{}
	for _, m := range members {
		emails[m.UserID] = m.Email
	}
	for _, g := range conn.Grants {
		if g.Status != domain.GrantActive {
			continue
		}
		text := msgGrantOrganization
		switch {
		case g.Kind == domain.GrantOrganization:
			d.HasOrg = true
		case g.SubjectUserID == c.Me().User.ID:
			text = msgGrantJustMe
		case emails[g.SubjectUserID] != "":
			text = personName(emails[g.SubjectUserID])
		default:
			text = "A member"
		}
		d.Grants = append(d.Grants, grantRow{ID: g.ID, Text: text})
	}
	for _, in := range conn.Installs {
		text := msgAgentsAny
		if in.TargetType == "company" {
			d.HasAny = true
		} else {
			text = idx.Name(in.TargetID)
		}
		d.Installs = append(d.Installs, installRow{ID: in.ID, Text: text})
	}
	for _, ib := range d.Inboxes {
		d.TrustHref[ib.ID] = "/c/" + c.cid + "/agents/" + ib.AssignedAgentID + "/trust?return=" + url.QueryEscape(d.Path)
	}
	c.render(http.StatusOK, "email_permissions", view{Title: "Permissions · AgentMail", Nav: "apps",
		Crumbs: c.appsCrumbs(crumb{"AgentMail", c.agentmailPath("")}, crumb{"Permissions", ""}), Data: d})
}

func (u *UI) addGrant(c *rc) {
	conn, ok := c.managedConnection()
	if !ok {
		return
	}
	body := apiclient.NewGrant{Kind: c.form("kind")}
	if c.form("kind") == domain.GrantUser {
		body.UserID = c.form("userId")
	}
	c.changeAccess(conn, func(ctx context.Context) error { return c.cl().AddGrant(ctx, c.cid, conn.ID, body) }, flashAccessSaved)
}

func (u *UI) addInstall(c *rc) {
	conn, ok := c.managedConnection()
	if !ok {
		return
	}
	body := apiclient.NewInstall{TargetType: c.form("targetType")}
	if c.form("targetType") == "agent" {
		body.TargetID = c.form("targetId")
	}
	c.changeAccess(conn, func(ctx context.Context) error { return c.cl().AddInstall(ctx, c.cid, conn.ID, body) }, flashAccessSaved)
}

// changeAccess makes an access change of the connection (call) and, when
// it is saved, goes back to the connection's permissions page with flash.
func (c *rc) changeAccess(conn domain.EmailConnection, call func(context.Context) error, flash string) {
	if e := c.check(call(c.ctx())); e != nil {
		c.accessError(conn, e)
		return
	}
	c.redirect(c.agentmailPath("/connections/"+conn.ID), flash)
}

// accessError shows an API refusal of an access change.
func (c *rc) accessError(conn domain.EmailConnection, e *APIError) {
	if e.Status == http.StatusNotFound || e.Status >= 500 || emailDisabled(e) {
		c.failEmail(e)
		return
	}
	c.renderError(e.Status, errorData{Status: e.Status, Heading: "Access not changed", Message: e.Message})
}

type confirmData struct {
	Question string
	Action   string
	Cancel   string
	Button   string
}

// confirmStop renders the "this stops receiving and sending" confirmation.
func (c *rc) confirmStop(addrs []string, action, button string) {
	d := confirmData{Question: fillText(msgStopsFor, "address", strings.Join(addrs, ", ")), Action: action,
		Cancel: c.agentmailPath("/connections/" + c.r.PathValue("conn")), Button: button}
	c.render(http.StatusOK, "email_confirm", view{Title: "Confirm", Nav: "apps",
		Crumbs: c.appsCrumbs(crumb{"AgentMail", c.agentmailPath("")}, crumb{"Permissions", d.Cancel}, crumb{"Confirm", ""}), Data: d})
}

// stoppedBy lists the addresses of the connection's inboxes whose agents
// lose access when installs become the remaining installs.
func (c *rc) stoppedBy(connID string, remaining []domain.EmailInstall) []string {
	all, _ := c.allInboxes()
	var out []string
	for _, ib := range all {
		if ib.Status == domain.EndpointArchived || ib.CredentialConnectionID == nil || *ib.CredentialConnectionID != connID {
			continue
		}
		if remaining == nil || !agentCovered(remaining, c.cid, ib.AssignedAgentID) {
			out = append(out, inboxAddr(ib))
		}
	}
	return out
}

func inboxAddr(ib domain.EmailEndpointSummary) string {
	if ib.Address == nil {
		return "an unfinished setup"
	}
	return *ib.Address
}

func (u *UI) removeInstall(c *rc) {
	conn, ok := c.managedConnection()
	if !ok {
		return
	}
	iid, ok := c.requirePathID("iid")
	if !ok {
		return
	}
	remaining := []domain.EmailInstall{}
	for _, in := range conn.Installs {
		if in.ID != iid {
			remaining = append(remaining, in)
		}
	}
	if c.form("confirm") != "1" {
		if addrs := c.stoppedBy(conn.ID, remaining); len(addrs) > 0 {
			c.confirmStop(addrs, c.r.URL.Path, "Remove access")
			return
		}
	}
	c.changeAccess(conn, func(ctx context.Context) error { return c.cl().DeleteInstall(ctx, c.cid, conn.ID, iid) }, flashInstallRemoved)
}

func (u *UI) revokeGrant(c *rc) {
	conn, ok := c.managedConnection()
	if !ok {
		return
	}
	gid, ok := c.requirePathID("gid")
	if !ok {
		return
	}
	others := 0
	for _, g := range conn.Grants {
		if g.Status == domain.GrantActive && g.ID != gid {
			others++
		}
	}
	if c.form("confirm") != "1" && others == 0 {
		// Revoking the last grant makes the credential unusable: every
		// inbox set up from it stops.
		if addrs := c.stoppedBy(conn.ID, nil); len(addrs) > 0 {
			c.confirmStop(addrs, c.r.URL.Path, "Revoke access")
			return
		}
	}
	c.changeAccess(conn, func(ctx context.Context) error { return c.cl().RevokeGrant(ctx, c.cid, conn.ID, gid) }, flashGrantRevoked)
}
