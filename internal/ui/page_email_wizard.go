package ui

import (
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/google/uuid"

	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/email"
	"github.com/paperclipai/paperclipai/internal/store"
)

// E5, the "give an agent an email address" wizard: Agent → Email address →
// Review, then the ready screen. The request id in the URL is the setup's
// identity (the API's idempotency key and the inbox connection's id), so a
// reload, Back, "Try again" or "Finish setup" resumes the same setup and
// never creates a second inbox. Every other piece of state is non-secret
// and lives in the URL query; API keys never do.

const (
	stepAgent   = "agent"
	stepAddress = "address"
	stepReview  = "review"
)

// wizState is the wizard's URL state.
type wizState struct {
	Step, Agent, Connection, Mode, Username, Domain, Inbox, Receive string
	Taken                                                           []string
	AllowInboxKey                                                   bool
}

var (
	uiUsernameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]*$`)
	nonUsername  = regexp.MustCompile(`[^a-z0-9._-]+`)
)

func readWizState(v url.Values) wizState {
	s := wizState{Step: v.Get("step"), Mode: v.Get("mode"), Receive: v.Get("receive"), AllowInboxKey: v.Get("allowInboxKey") == "1"}
	if id := v.Get("agent"); store.ValidID(id) {
		s.Agent = id
	}
	if id := v.Get("connection"); store.ValidID(id) {
		s.Connection = id
	}
	if u := strings.ToLower(strings.TrimSpace(v.Get("username"))); len(u) <= 64 {
		s.Username = u
	}
	if d := strings.ToLower(strings.TrimSpace(v.Get("domain"))); len(d) <= 253 {
		s.Domain = d
	}
	if in := strings.ToLower(strings.TrimSpace(v.Get("inbox"))); len(in) <= 254 {
		s.Inbox = in
	}
	if s.Mode != "existing" {
		s.Mode = "new"
	}
	if s.Receive != domain.ReceiveWebhook {
		s.Receive = domain.ReceiveWebSocket
	}
	if s.Step != stepAddress && s.Step != stepReview {
		s.Step = stepAgent
	}
	for _, t := range strings.Split(v.Get("taken"), ",") {
		t = strings.ToLower(strings.TrimSpace(t))
		if t != "" && len(t) <= 254 && len(s.Taken) < 20 && !slices.Contains(s.Taken, t) {
			s.Taken = append(s.Taken, t)
		}
	}
	return s
}

// query encodes the state for step.
func (s wizState) query(step string) string {
	q := url.Values{"step": {step}}
	set := func(k, v string) {
		if v != "" {
			q.Set(k, v)
		}
	}
	set("agent", s.Agent)
	set("connection", s.Connection)
	if s.Mode == "existing" {
		q.Set("mode", "existing")
		set("inbox", s.Inbox)
	} else {
		set("username", s.Username)
	}
	set("domain", s.Domain)
	if s.Receive == domain.ReceiveWebhook {
		q.Set("receive", s.Receive)
	}
	if len(s.Taken) > 0 {
		q.Set("taken", strings.Join(s.Taken, ","))
	}
	if s.AllowInboxKey {
		q.Set("allowInboxKey", "1")
	}
	return q.Encode()
}

// address is the address the state describes ("" when incomplete).
func (s wizState) address() string {
	if s.Mode == "existing" {
		return s.Inbox
	}
	if s.Username == "" {
		return ""
	}
	d := s.Domain
	if d == "" {
		d = email.DefaultDomain
	}
	return s.Username + "@" + d
}

// defaultUsername derives an address from an agent's name.
func defaultUsername(name string) string {
	u := nonUsername.ReplaceAllString(strings.ToLower(name), "-")
	u = strings.Trim(u, "-.")
	if len(u) > 64 {
		u = strings.Trim(u[:64], "-.")
	}
	return u
}

// suggestions are alternatives to a taken username, none known taken.
func suggestions(u, dom, rid string, known func(string) bool) []string {
	var out []string
	for _, suffix := range []string{"-agent", "-team", "-" + rid[:6]} {
		base := u
		if len(base)+len(suffix) > 64 {
			base = base[:64-len(suffix)]
		}
		s := base + suffix
		if !known(s+"@"+dom) && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

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
	var ep domain.EmailEndpointSummary
	e := c.api("GET", "/email/inboxes/"+w.RID, nil, &ep)
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
		func() { e2 = c.api("GET", "/companies/"+c.cid+"/email/connections", nil, &w.Creds) },
		func() { _ = c.api("GET", "/instance/settings", nil, &sett) },
		func() { _ = c.api("GET", "/companies/"+c.cid+"/environments", nil, &envs) },
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
	var conn domain.EmailConnection
	if e := c.api("GET", "/companies/"+c.cid+"/email/connections/"+w.State.Connection, nil, &conn); e != nil {
		return ""
	}
	if !agentCovered(conn.Installs, c.cid, w.Agent.ID) {
		return w.Agent.Name + " will be added to this connection’s allowed agents."
	}
	return "Choosing an agent also gives them access to this connection."
}

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
	var res email.InspectResult
	if e := c.apiLong("POST", "/companies/"+c.cid+"/email/connections/"+connID+"/inspect", nil, &res); e != nil {
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

func (c *rc) renderWizard(status int, w *wizard) {
	w.steps()
	title := "Give an agent an email address"
	c.render(status, "email_wizard", view{Title: title, Nav: "apps",
		Crumbs: c.appsCrumbs(crumb{"AgentMail", c.agentmailPath("")}, crumb{"Email address setup", ""}), Data: w})
}

// wizardPage renders the current step.
func (u *UI) wizardPage(c *rc) {
	if !c.requireManager("give agents email addresses") {
		return
	}
	rid, ok := c.pathUUID("rid")
	if !ok {
		c.notFound()
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

// postWizard starts a wizard POST: manager, request id, resume rules and
// the common data. The state comes from the action URL's query; the
// form's own fields from the body.
func (u *UI) postWizard(c *rc) (*wizard, bool) {
	if !c.requireManager("give agents email addresses") {
		return nil, false
	}
	rid, ok := c.pathUUID("rid")
	if !ok {
		c.notFound()
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
			var res email.AddressCheck
			e := c.apiLong("POST", "/companies/"+c.cid+"/email/connections/"+st.Connection+"/check-address",
				map[string]string{"username": st.Username, "domain": st.Domain}, &res)
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

func appendTaken(list []string, addr string) []string {
	addr = strings.ToLower(addr)
	if addr == "" || slices.Contains(list, addr) {
		return list
	}
	if len(list) >= 20 {
		list = list[1:]
	}
	return append(list, addr)
}

// wizardCheck answers the address step's live check (JavaScript): the
// check fragment for the posted username and domain.
func (u *UI) wizardCheck(c *rc) {
	if !c.requireManager("give agents email addresses") {
		return
	}
	rid, ok := c.pathUUID("rid")
	if !ok {
		c.notFound()
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
		e = c.apiLong("POST", "/companies/"+c.cid+"/email/connections/"+w.State.Connection+"/check-address",
			map[string]string{"username": w.State.Username, "domain": w.State.Domain}, &res)
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

// partial writes one named template of a page's set (an answer to a
// script's POST, so not cached).
func (c *rc) partial(page, name string, v view) {
	t := c.u.tpl.pages[page].Lookup(name)
	h := c.w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	v.CSRF = c.CSRF()
	if err := t.Execute(c.w, v); err != nil {
		c.u.log.Error("render partial", "name", name, "err", err)
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
	body := map[string]any{"assignedAgentId": st.Agent, "credentialConnectionId": st.Connection,
		"receiveMode": st.Receive, "idempotencyKey": w.RID}
	if st.Mode == "existing" {
		body["inboxId"] = st.Inbox
	} else {
		if !uiUsernameRE.MatchString(st.Username) {
			c.redirect(w.URL(stepAddress), "")
			return
		}
		body["username"], body["domain"] = st.Username, st.Domain
		if st.Domain == "" {
			body["domain"] = email.DefaultDomain
		}
	}
	var out domain.EmailEndpointSummary
	e := c.apiLong("POST", "/companies/"+c.cid+"/email/inboxes", body, &out)
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
		if e := c.apiLong("POST", "/email/inboxes/"+w.RID+"/control", map[string]string{"action": "remove"}, nil); e != nil {
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
	if !c.requireManager("give agents email addresses") {
		return
	}
	rid, ok := c.pathUUID("rid")
	if !ok {
		c.notFound()
		return
	}
	var ep domain.EmailEndpointSummary
	if e := c.api("GET", "/email/inboxes/"+rid, nil, &ep); e != nil {
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

// Option is a credential option's text: "{label} · saved {date}".
func (w *wizard) Option(o email.CredentialOption) string {
	return o.Label + " · saved " + o.CreatedAt.UTC().Format("2006-01-02")
}

// CheckURL is the address check's target (the script posts to it).
func (w *wizard) CheckURL() string { return w.Base + "/check?" + w.State.query(stepAddress) }
