package ui

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/paperclipai/paperclipai/internal/apiclient"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/email"
)

// The email pages (docs/ui.md, "Pages"): Apps, AgentMail, connecting a
// credential and its permissions, the "give an agent an email address"
// wizard, and an inbox's detail pages. Like every page they act through
// the JSON API in-process; provider operations run detached from the
// browser request so a closed tab never aborts a setup half-way.

// providerTimeout caps one UI request's provider operations (each provider
// call has its own shorter timeout; setup makes up to ~7 of them).
const providerTimeout = 150 * time.Second

// emailState is the email pages' in-process state: the short-lived cache
// of what a saved credential can reach (the wizard's address step reads it
// on every render).
type emailState struct {
	mu      sync.Mutex
	inspect map[string]inspectEntry
}

type inspectEntry struct {
	at  time.Time
	res email.InspectResult
}

const inspectTTL = 60 * time.Second

func (u *UI) emailRoutes(m *http.ServeMux) {
	m.HandleFunc("GET /c/{cid}/apps", u.company(u.appsPage))
	m.HandleFunc("POST /c/{cid}/apps/enable-email", u.company(u.enableEmail))
	m.HandleFunc("GET /c/{cid}/apps/agentmail", u.company(u.agentmailPage))
	m.HandleFunc("POST /c/{cid}/apps/agentmail/inboxes/{eid}/discard", u.company(u.discardInbox))

	m.HandleFunc("GET /c/{cid}/apps/agentmail/connect", u.company(u.connectAccessPage))
	m.HandleFunc("GET /c/{cid}/apps/agentmail/connect/key", u.company(u.connectKeyPage))
	m.HandleFunc("POST /c/{cid}/apps/agentmail/connect", u.company(u.connectSubmit))
	m.HandleFunc("GET /c/{cid}/apps/agentmail/connections/{conn}/connected", u.company(u.connectedPage))
	m.HandleFunc("GET /c/{cid}/apps/agentmail/connections/{conn}", u.company(u.permissionsPage))
	m.HandleFunc("POST /c/{cid}/apps/agentmail/connections/{conn}/grants", u.company(u.addGrant))
	m.HandleFunc("POST /c/{cid}/apps/agentmail/connections/{conn}/grants/{gid}/revoke", u.company(u.revokeGrant))
	m.HandleFunc("POST /c/{cid}/apps/agentmail/connections/{conn}/installs", u.company(u.addInstall))
	m.HandleFunc("POST /c/{cid}/apps/agentmail/connections/{conn}/installs/{iid}/remove", u.company(u.removeInstall))

	m.HandleFunc("GET /c/{cid}/apps/agentmail/setup", u.company(u.setupEntry))
	m.HandleFunc("GET /c/{cid}/apps/agentmail/setup/{rid}", u.company(u.wizardPage))
	m.HandleFunc("GET /c/{cid}/apps/agentmail/setup/{rid}/done", u.company(u.readyPage))
	m.HandleFunc("POST /c/{cid}/apps/agentmail/setup/{rid}/agent", u.company(u.wizardAgent))
	m.HandleFunc("POST /c/{cid}/apps/agentmail/setup/{rid}/address", u.company(u.wizardAddress))
	m.HandleFunc("POST /c/{cid}/apps/agentmail/setup/{rid}/check", u.company(u.wizardCheck))
	m.HandleFunc("POST /c/{cid}/apps/agentmail/setup/{rid}/create", u.company(u.wizardCreate))
	m.HandleFunc("POST /c/{cid}/apps/agentmail/setup/{rid}/restart", u.company(u.wizardRestart))

	m.HandleFunc("GET /c/{cid}/apps/agentmail/inboxes/{eid}", u.company(u.inboxRoot))
	m.HandleFunc("GET /c/{cid}/apps/agentmail/inboxes/{eid}/{tab}", u.company(u.inboxPage))
	m.HandleFunc("POST /c/{cid}/apps/agentmail/inboxes/{eid}/pause", u.company(u.inboxControl("pause")))
	m.HandleFunc("POST /c/{cid}/apps/agentmail/inboxes/{eid}/resume", u.company(u.inboxControl("resume")))
	m.HandleFunc("POST /c/{cid}/apps/agentmail/inboxes/{eid}/reconnect", u.company(u.inboxReconnect))
	m.HandleFunc("POST /c/{cid}/apps/agentmail/inboxes/{eid}/disconnect", u.company(u.inboxDisconnect))
	u.inboundRoutes(m)
}

// agentmailPath is the AgentMail page of the request's company, plus rest.
func (c *rc) agentmailPath(rest string) string { return "/c/" + c.cid + "/apps/agentmail" + rest }

// apiLong calls the API for an operation that talks to AgentMail: detached
// from the browser (closing the tab must not abort a setup half-way) and
// capped at providerTimeout.
func (c *rc) apiLong(method, path string, in, out any) *APIError {
	ctx, cancel := c.longCtx()
	defer cancel()
	return c.u.callAPI(ctx, c.actor, method, path, in, out)
}

// longCtx is the context of a typed call that talks to AgentMail (see
// apiLong), with the request's actor preset.
func (c *rc) longCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(acting(context.WithoutCancel(c.r.Context()), c.actor), providerTimeout)
}

// emailDisabled reports whether e is the API's "email connections are
// off" refusal.
func emailDisabled(e *APIError) bool {
	return e != nil && e.Status == http.StatusForbidden && e.Code == "email_connections_disabled"
}

// failEmail renders the email-disabled state for that refusal and the
// usual error page otherwise.
func (c *rc) failEmail(e *APIError) {
	if emailDisabled(e) {
		c.renderEmailDisabled(http.StatusForbidden)
		return
	}
	c.fail(e)
}

// requireManager renders the 403 page for non-managers.
func (c *rc) requireManager(action string) bool {
	if c.caps.Manager {
		return true
	}
	c.forbidden(action, "")
	return false
}

// eligibleAgents are the agents an inbox can be assigned to.
func eligibleAgents(list []domain.Agent) []domain.Agent {
	var out []domain.Agent
	for _, a := range list {
		if a.Status != domain.AgentTerminated && a.Status != domain.AgentPendingApproval {
			out = append(out, a)
		}
	}
	return out
}

// inboxView is one email address as the pages show it.
type inboxView struct {
	domain.EmailEndpointSummary
	AgentName string
	Key       string // badge data-status
	Label     string
	Tone      string
	Sentence  string
}

// Addr is the address or "" for a draft without one.
func (v inboxView) Addr() string {
	if v.Address == nil {
		return ""
	}
	return *v.Address
}

// Err is the last error or "".
func (v inboxView) Err() string {
	if v.LastError == nil {
		return ""
	}
	return *v.LastError
}

// Conn is the saved credential's id or "".
func (v inboxView) Conn() string {
	if v.CredentialConnectionID == nil {
		return ""
	}
	return *v.CredentialConnectionID
}

func newInboxView(s domain.EmailEndpointSummary, agents agentIndex) inboxView {
	v := inboxView{EmailEndpointSummary: s, AgentName: agents.Name(s.AssignedAgentID)}
	switch {
	case s.Status == domain.EndpointActive && s.LastError == nil:
		v.Key, v.Sentence = inboxKeyReceiving, agentText(msgInboxReceiving, v.AgentName)
	case s.Status == domain.EndpointActive:
		v.Key, v.Sentence = inboxKeyAttention, "Reason: "+*s.LastError
	case s.Status == domain.EndpointPaused:
		v.Key, v.Sentence = inboxKeyPaused, msgInboxPaused
	case s.Status == domain.EndpointDraft && s.Address == nil:
		v.Key, v.Sentence = inboxKeyDraft, msgInboxDraftNoAddr
	case s.Status == domain.EndpointDraft:
		v.Key, v.Sentence = inboxKeyDraft, agentText(msgInboxDraftAddr, v.AgentName)
	default:
		v.Key, v.Sentence = inboxKeyArchived, msgInboxArchived
	}
	if s.Status == domain.EndpointDraft && s.LastError != nil {
		// Why the setup stopped (inbox health), so it can be fixed or
		// discarded.
		v.Sentence += " Last error: " + *s.LastError
	}
	v.Label, v.Tone = inboxBadgeLabels[v.Key], inboxBadgeTones[v.Key]
	return v
}

// allInboxes reads the company's inboxes, disconnected ones included.
func (c *rc) allInboxes() ([]domain.EmailEndpointSummary, *APIError) {
	var list []domain.EmailEndpointSummary
	e := all(c, c.cl().Inboxes(c.cid), apiclient.Query("includeArchived", "true"), &list)
	return list, e
}

// connLabel names a saved credential like the API's credential list does.
func connLabel(conn domain.EmailConnection) string {
	if conn.Name != "" && conn.Name != "AgentMail" {
		return conn.Name
	}
	switch conn.Scope {
	case "inbox":
		return "AgentMail inbox key · " + conn.InboxID
	case "unavailable":
		return "AgentMail key · unavailable"
	}
	return "AgentMail account key"
}

// accessFacts are a connection's human and agent access in words.
type accessFacts struct {
	Humans []string
	Agents []string
}

func (c *rc) describeAccess(conn domain.EmailConnection, agents agentIndex, members []domain.Membership) accessFacts {
	var f accessFacts
	emails := map[string]string{}
	for _, m := range members {
		emails[m.UserID] = m.Email
	}
	me := c.Me()
	for _, g := range conn.Grants {
		if g.Status != domain.GrantActive {
			continue
		}
		switch {
		case g.Kind == domain.GrantOrganization:
			f.Humans = append(f.Humans, msgGrantOrganization)
		case g.SubjectUserID == me.User.ID:
			f.Humans = append(f.Humans, msgGrantJustMe)
		case emails[g.SubjectUserID] != "":
			f.Humans = append(f.Humans, personName(emails[g.SubjectUserID]))
		default:
			f.Humans = append(f.Humans, "A member")
		}
	}
	if len(f.Humans) == 0 {
		f.Humans = []string{msgGrantRevoked}
	}
	for _, in := range conn.Installs {
		if in.TargetType == "company" {
			f.Agents = append(f.Agents, msgAgentsAny)
		} else {
			f.Agents = append(f.Agents, agents.Name(in.TargetID))
		}
	}
	if len(f.Agents) == 0 {
		f.Agents = []string{msgAgentsNone}
	}
	slices.Sort(f.Humans)
	f.Humans = slices.Compact(f.Humans)
	return f
}

// agentCovered reports whether a connection's installs let agentID use it.
func agentCovered(installs []domain.EmailInstall, companyID, agentID string) bool {
	for _, i := range installs {
		if (i.TargetType == "company" && i.TargetID == companyID) || (i.TargetType == "agent" && i.TargetID == agentID) {
			return true
		}
	}
	return false
}

// queryWith returns the request's query with key set to value.
func queryWith(q url.Values, kv ...string) string {
	out := url.Values{}
	for k, v := range q {
		out[k] = append([]string(nil), v...)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == "" {
			out.Del(kv[i])
		} else {
			out.Set(kv[i], kv[i+1])
		}
	}
	return out.Encode()
}

// emulatorURL is the AgentMail emulator's base URL when the server talks
// to one on loopback (run --demo, tests): the ready screen then shows how
// to send a test email from the command line. A real AgentMail is https.
func (u *UI) emulatorURL() string {
	api := u.d.Config.AgentMailAPIURL
	for _, p := range []string{"http://127.0.0.1:", "http://localhost:", "http://[::1]:"} {
		if strings.HasPrefix(api, p) {
			return strings.TrimSuffix(strings.TrimRight(api, "/"), "/v0")
		}
	}
	return ""
}

// webhookAllowed reports whether webhook receiving can work: a public
// HTTPS URL, or a plain-HTTP loopback one with --insecure-local-webhooks
// (the local emulator). The rule is the email service's (registerWebhook):
// the UI offered Webhook disabled on a server whose API took it.
func (u *UI) webhookAllowed() bool {
	cfg := u.d.Config
	return strings.HasPrefix(cfg.PublicURL, "https://") || (cfg.InsecureLocalWebhooks && strings.HasPrefix(cfg.PublicURL, "http://"))
}
