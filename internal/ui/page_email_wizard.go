package ui

import (
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/google/uuid"

	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/email"
)

// E5, the "give an agent an email address" wizard: Agent → Email address →
// Review, then the ready screen. The request id in the URL is the setup's
// identity (the API's idempotency key and the inbox connection's id), so a
// reload, Back, "Try again" or "Finish setup" resumes the same setup and
// never creates a second inbox. Every other piece of state is non-secret
// and lives in the URL query; API keys never do.
//
// This file holds the wizard's shared shape and the resume rules; the URL
// state is in page_email_wizard_state.go, step 1 in _agent.go, step 2 and
// the live address check in _address.go, step 3 and the ready screen in
// _review.go.

const (
	stepAgent   = "agent"
	stepAddress = "address"
	stepReview  = "review"
)

// trustNotice is the trust notice of the chosen agent (§ trust notice).
type trustNotice struct {
	Agent, Preset                      string
	HasBoundary, IsolatedOn, SandboxOK bool
	TrustHref, SettingsHref, EditHref  string
}

// wizard is one wizard request: the setup request id, its URL state, the
// draft endpoint (if any) and what the current step shows.
type wizard struct {
	RID      string
	Base     string // /c/{cid}/apps/agentmail/setup/{rid}
	State    wizState
	Step     string
	Steps    stepsNav
	Draft    *domain.EmailEndpointSummary
	Finish   bool // a draft with an address: finish-setup mode
	Locked   bool // agent locked to the draft's
	ConnLock bool // connection locked to the draft's

	Agents     []domain.Agent
	Agent      *domain.Agent
	Creds      []email.CredentialOption
	Cred       *email.CredentialOption
	Trust      *trustNotice
	AccessNote string
	NoBoundary bool

	Err        *APIError
	FieldErr   map[string]string
	Restricted *restrictedInbox

	// Address step.
	Domains      []string
	Existing     []existingInbox
	OnlyExisting bool
	Check        addressCheck
	WebhookOK    bool
	TrustSummary string

	// Review step.
	Address     string
	ConnLabel   string
	TrustLabel  string
	CreateLabel string
	ErrKind     string // running | owner | gates | key | provider
	NewKey      bool   // reason of the error links: a key can be changed

	// Ready screen.
	EmulatorCmd string

	keepUsername bool // a posted username stays as typed
}

type restrictedInbox struct {
	Inbox     string
	Assigned  bool
	KeyHandle string
}

type existingInbox struct {
	Address  string
	Assigned bool
}

// addressCheck is the address check's answer: "taken" or "unknown",
// never "free" (docs/email-setup.md, "Address check").
type addressCheck struct {
	Status      string // "", checking, taken, unknown, invalid, error
	Address     string
	Message     string
	Suggestions []string
}

// URL returns the wizard's page for step with the current state.
func (w *wizard) URL(step string) string { return w.Base + "?" + w.State.query(step) }

// Action is a POST target carrying the current state in its query.
func (w *wizard) Action(name string) string { return w.Base + "/" + name + "?" + w.State.query(w.Step) }

// Selected reports whether the credential option id is the chosen one.
func (w *wizard) Selected(id string) bool { return w.State.Connection == id }

func (c *rc) newWizard(rid string, st wizState) *wizard {
	w := &wizard{RID: rid, Base: c.agentmailPath("/setup/" + rid), State: st, Step: st.Step, FieldErr: map[string]string{}}
	return w
}

func (w *wizard) steps() {
	cur := map[string]int{stepAgent: 0, stepAddress: 1, stepReview: 2}[w.Step]
	w.Steps = stepsNav{Steps: []string{"Agent", "Email address", "Review"}, Current: cur,
		Links: []string{w.URL(stepAgent), w.URL(stepAddress), ""}}
	if w.Finish {
		// The address exists already; its earlier steps cannot change.
		w.Steps.Links = []string{"", "", ""}
	}
}

// setupEntry mints a new request id and starts the wizard with it.
func (u *UI) setupEntry(c *rc) {
	if !c.requireManager("give agents email addresses") {
		return
	}
	st := readWizState(c.r.URL.Query())
	c.redirect(c.agentmailPath("/setup/"+uuid.NewString()+"?"+st.query(stepAgent)), "")
}

// resume reads the setup's endpoint and applies the resume rules: a
// fresh id keeps the URL state; a draft locks its agent (and saved
// credential); a draft with an address goes to finish-setup mode; an
// active inbox goes to the ready screen, a paused one to its settings, a
// disconnected one is an error. It returns false when it answered.
func (u *UI) resume(c *rc, w *wizard) bool {
	ep, err := c.cl().Inbox(c.ctx(), w.RID)
	e := c.check(err)
	switch {
	case e != nil && e.Status == http.StatusNotFound:
		return true
	case e != nil:
		c.failEmail(e)
		return false
	case ep.CompanyID != c.cid:
		c.notFound()
		return false
	}
	switch ep.Status {
	case domain.EndpointActive:
		c.redirect(w.Base+"/done", "")
		return false
	case domain.EndpointPaused:
		c.redirect(c.agentmailPath("/inboxes/"+ep.ID+"/settings"), msgAlreadyConnected)
		return false
	case domain.EndpointArchived:
		c.render(http.StatusConflict, "email_wizard_gone", view{Title: "Setup ended", Nav: "apps",
			Crumbs: c.appsCrumbs(crumb{"AgentMail", c.agentmailPath("")}, crumb{"Setup", ""}),
			Data:   map[string]string{"Restart": c.agentmailPath("/setup?agent=" + ep.AssignedAgentID)}})
		return false
	}
	w.Draft = &ep
	w.Locked = true
	w.State.Agent = ep.AssignedAgentID
	if ep.CredentialConnectionID != nil {
		w.State.Connection = *ep.CredentialConnectionID
		w.ConnLock = true
	}
	if ep.ReceiveMode != "" {
		w.State.Receive = ep.ReceiveMode
	}
	if ep.Address != nil {
		w.Finish = true
		w.State.Mode, w.State.Inbox = "existing", *ep.Address
		// Finishing needs a credential. A draft made through the API with a
		// raw key has no saved connection: it picks one on step 1 first
		// (jumping to review would send it back to step 1, in a loop).
		if w.State.Connection != "" {
			w.Step = stepReview
		}
	}
	return true
}

// load fills what every step needs: the agents, the saved credentials,
// the chosen agent and its trust notice.
func (u *UI) loadWizard(c *rc, w *wizard) bool {
	var (
		agents []domain.Agent
		e1, e2 *APIError
		sett   domain.InstanceSettings
		envs   []domain.Environment
	)
	parallel(
		func() { agents, _, e1 = c.agents() },
		func() { e2 = into(c, &w.Creds)(c.cl().Connections(c.ctx(), c.cid)) },
		func() { _ = into(c, &sett)(c.cl().Settings(c.ctx())) },
		func() { _ = into(c, &envs)(c.cl().Environments(c.ctx(), c.cid)) },
	)
	for _, e := range []*APIError{e1, e2} {
		if e != nil {
			c.failEmail(e)
			return false
		}
	}
	w.Agents = eligibleAgents(agents)
	for i := range agents {
		if agents[i].ID == w.State.Agent {
			w.Agent = &agents[i]
		}
	}
	if w.Agent != nil && !slices.ContainsFunc(w.Agents, func(a domain.Agent) bool { return a.ID == w.Agent.ID }) && !w.Locked {
		w.Agent = nil
	}
	if w.State.Connection == "" && !w.ConnLock && w.Step == stepAgent {
		// Preselect an account key (organization or pod).
		for _, o := range w.Creds {
			if o.Scope == "organization" || o.Scope == "pod" {
				w.State.Connection = o.ID
				break
			}
		}
	}
	for i := range w.Creds {
		if w.Creds[i].ID == w.State.Connection {
			w.Cred = &w.Creds[i]
		}
	}
	if w.Agent != nil {
		w.Trust = c.trustNoticeFor(*w.Agent, sett, envs, w.URL(w.Step))
		w.NoBoundary = w.Trust.Preset == domain.TrustLowTrustReview && !w.Trust.HasBoundary
		w.TrustLabel = labelOr(trustLabels, w.Trust.Preset)
	}
	w.WebhookOK = u.webhookAllowed()
	return true
}

func (c *rc) trustNoticeFor(a domain.Agent, sett domain.InstanceSettings, envs []domain.Environment, back string) *trustNotice {
	t := &trustNotice{Agent: a.Name, Preset: a.Permissions.TrustPreset, IsolatedOn: sett.Experimental.EnableIsolatedWorkspaces,
		TrustHref: "/c/" + c.cid + "/agents/" + a.ID + "/trust?return=" + url.QueryEscape(back),
		EditHref:  "/c/" + c.cid + "/agents/" + a.ID + "/edit"}
	if t.Preset == "" {
		t.Preset = domain.TrustStandard
	}
	if b := a.Permissions.Boundary(); b != nil && (len(b.ProjectIDs) > 0 || b.RootIssueID != "") {
		t.HasBoundary = true
	}
	for _, e := range envs {
		if e.ID == a.EnvironmentID && e.Driver == "sandbox" && e.Status == "active" {
			t.SandboxOK = true
		}
	}
	if c.caps.InstanceAdmin {
		t.SettingsHref = "/settings"
	}
	return t
}

// accessNote says what choosing the agent does to the credential's access.
func (c *rc) accessNote(w *wizard) string {
	if w.Agent == nil || w.State.Connection == "" {
		return "Choosing an agent also gives them access to this connection."
	}
	conn, err := c.cl().Connection(c.ctx(), c.cid, w.State.Connection)
	if c.check(err) != nil {
		return ""
	}
	if !agentCovered(conn.Installs, c.cid, w.Agent.ID) {
		return w.Agent.Name + " will be added to this connection’s allowed agents."
	}
	return "Choosing an agent also gives them access to this connection."
}

func (c *rc) renderWizard(status int, w *wizard) {
	w.steps()
	title := "Give an agent an email address"
	c.render(status, "email_wizard", view{Title: title, Nav: "apps",
		Crumbs: c.appsCrumbs(crumb{"AgentMail", c.agentmailPath("")}, crumb{"Email address setup", ""}), Data: w})
}

// setupRID starts a request of a setup: the caller manages agents and the
// path holds the setup's request id. It returns false when it answered.
func (c *rc) setupRID() (string, bool) {
	if !c.requireManager("give agents email addresses") {
		return "", false
	}
	return c.requirePathID("rid")
}

// wizardPage renders the current step.
func (u *UI) wizardPage(c *rc) {
	rid, ok := c.setupRID()
	if !ok {
		return
	}
	w := c.newWizard(rid, readWizState(c.r.URL.Query()))
	if !u.resume(c, w) || !u.loadWizard(c, w) {
		return
	}
	if c.r.URL.Query().Get("fragment") == "agent-notes" {
		w.AccessNote = c.accessNote(w)
		c.renderWizard(http.StatusOK, w)
		return
	}
	u.showStep(c, w, http.StatusOK)
}

// showStep renders w.Step after its preconditions (earlier steps done).
func (u *UI) showStep(c *rc, w *wizard, status int) {
	if w.Step != stepAgent && (w.Agent == nil || w.State.Connection == "") {
		c.redirect(w.URL(stepAgent), "")
		return
	}
	switch w.Step {
	case stepAgent:
		w.AccessNote = c.accessNote(w)
	case stepAddress:
		if !u.prepareAddress(c, w) {
			return
		}
	case stepReview:
		if !w.Finish && (w.State.address() == "" || (w.State.Mode == "new" && !uiUsernameRE.MatchString(w.State.Username))) {
			c.redirect(w.URL(stepAddress), "")
			return
		}
		u.prepareReview(c, w)
	}
	c.renderWizard(status, w)
}

// postWizard starts a wizard POST: manager, request id, resume rules and
// the common data. The state comes from the action URL's query; the
// form's own fields from the body.
func (u *UI) postWizard(c *rc) (*wizard, bool) {
	rid, ok := c.setupRID()
	if !ok {
		return nil, false
	}
	_ = c.r.ParseForm()
	w := c.newWizard(rid, readWizState(c.r.URL.Query()))
	if w.State.Connection != "" {
		c.dropInspect(w.State.Connection)
	}
	if !u.resume(c, w) || !u.loadWizard(c, w) {
		return nil, false
	}
	return w, true
}

// post is a field of the POST body (never of the URL query, which holds
// the wizard's state).
func (c *rc) post(name string) string {
	if c.r.PostForm == nil {
		_ = c.r.ParseForm()
	}
	return strings.TrimSpace(c.r.PostForm.Get(name))
}

// KeyStepURL is step 1 with the inbox-key allowance and the credential
// cleared ("Choose a key for a new address").
func (w *wizard) KeyStepURL() string {
	s := w.State
	s.AllowInboxKey, s.Connection, s.Mode, s.Inbox = false, "", "new", ""
	return w.Base + "?" + s.query(stepAgent)
}

// AgentName is the chosen agent's name ("your agent" before one is chosen).
func (w *wizard) AgentName() string {
	if w.Agent == nil {
		return "your agent"
	}
	return w.Agent.Name
}

// Option is a credential option's text: "{label} · {date saved}" (short
// enough for a 390 px phone: a select cannot wrap its choice).
func (w *wizard) Option(o email.CredentialOption) string {
	return o.Label + " · " + o.CreatedAt.UTC().Format("2006-01-02")
}

// CheckURL is the address check's target (the script posts to it).
func (w *wizard) CheckURL() string { return w.Base + "/check?" + w.State.query(stepAddress) }
