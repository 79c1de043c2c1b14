package ui

import (
	"github.com/paperclipai/paperclipai/internal/api"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/paperclipai/paperclipai/internal/apiclient"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/email"
	"github.com/paperclipai/paperclipai/internal/inbound"
	"github.com/paperclipai/paperclipai/internal/store"
)

// Who may write to an agent: an inbox's Senders tab (its sender rules and
// their sync to AgentMail) and Quarantine tab, the company-wide quarantine
// with the suppressed recipients, and one quarantined message shown as
// plain text (no HTML, no remote content).

// inboundData is the Senders and Quarantine tabs' part of inboxData.
type inboundData struct {
	Rules      email.SenderRulesView
	RulesErr   *APIError
	Quarantine api.QuarantinePage
	QErr       *APIError
	Reason     string
	Reasons    []string
	Admin      bool
	Action     string // the bulk form's target
	Inboxes    map[string]string
}

// Lines joins a list one entry a line (the rules' textareas).
func (inboundData) Lines(l []string) string { return strings.Join(l, "\n") }

// ReasonLabel names a quarantine reason in plain words.
func (inboundData) ReasonLabel(r string) string {
	switch r {
	case store.QuarantineBlocked:
		return "Blocked by AgentMail"
	case store.QuarantineSpam:
		return "Spam"
	case store.QuarantineUnauthenticated:
		return "Failed authentication"
	case store.QuarantineSenderRule:
		return "Sender rules"
	case store.QuarantineAutomatic:
		return "Automatic mail"
	}
	return r
}

func (u *UI) inboundRoutes(m *http.ServeMux) {
	m.HandleFunc("POST /c/{cid}/apps/agentmail/inboxes/{eid}/quarantine", u.company(u.inboxQuarantineAction))
	m.HandleFunc("POST /c/{cid}/apps/agentmail/inboxes/{eid}/senders", u.company(u.inboxSendersAction))
	m.HandleFunc("GET /c/{cid}/apps/agentmail/quarantine", u.company(u.companyQuarantinePage))
	m.HandleFunc("POST /c/{cid}/apps/agentmail/quarantine", u.company(u.companyQuarantineAction))
	m.HandleFunc("GET /c/{cid}/apps/agentmail/quarantine/{qid}", u.company(u.quarantinedPage))
	m.HandleFunc("POST /c/{cid}/apps/agentmail/suppressions/lift", u.company(u.liftSuppression))
}

// loadInbound fills the Senders or Quarantine tab of d.
func (u *UI) loadInbound(c *rc, d *inboxData) {
	in := &inboundData{Reasons: store.QuarantineReasons, Admin: c.caps.Admin, Reason: c.r.URL.Query().Get("reason"),
		Action: d.Base + "/quarantine"}
	d.Inbound = in
	switch d.Tab {
	case "senders":
		in.RulesErr = into(c, &in.Rules)(c.cl().SenderRules(c.ctx(), d.Inbox.ID))
	case "quarantine":
		q := url.Values{}
		if slices.Contains(store.QuarantineReasons, in.Reason) {
			q.Set("reason", in.Reason)
		}
		if cur := c.r.URL.Query().Get("cursor"); cur != "" {
			q.Set("cursor", cur)
		}
		in.QErr = into(c, &in.Quarantine)(c.cl().InboxQuarantine(c.ctx(), d.Inbox.ID, q))
	}
}

// bulkQuarantine applies the form's action (release, block, block-domain)
// to every selected quarantined message and returns the flash.
func (c *rc) bulkQuarantine() string {
	if err := c.r.ParseForm(); err != nil {
		return "Nothing was changed."
	}
	ids := c.r.PostForm["id"]
	action := c.form("action")
	done, failed := 0, 0
	var lastErr *APIError
	for _, id := range ids {
		if !store.ValidID(id) {
			continue
		}
		var e *APIError
		switch action {
		case "release":
			e = c.check(c.cl().Release(c.ctx(), id))
		case "block", "block-domain":
			e = c.check(c.cl().BlockSender(c.ctx(), id, action == "block-domain"))
		default:
			return "Choose Release or Block sender."
		}
		if e != nil {
			failed++
			lastErr = e
			continue
		}
		done++
	}
	switch {
	case len(ids) == 0:
		return "Select at least one message."
	case failed > 0 && lastErr != nil:
		return "Done for " + itoa(done) + ", failed for " + itoa(failed) + ": " + lastErr.Message
	case action == "release":
		return "Released " + itoa(done) + " message(s); they become tasks as if they had just arrived."
	}
	return "Blocked the sender of " + itoa(done) + " message(s)."
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}

func (u *UI) inboxQuarantineAction(c *rc) {
	eid, ok := c.requirePathID("eid")
	if !ok {
		return
	}
	c.redirect(c.agentmailPath("/inboxes/"+eid+"/quarantine"), c.bulkQuarantine())
}

func (u *UI) companyQuarantineAction(c *rc) {
	c.redirect(c.agentmailPath("/quarantine"), c.bulkQuarantine())
}

// splitEntries reads a textarea of entries, one a line (commas and
// spaces also separate).
func splitEntries(v string) []string {
	out := []string{}
	for _, f := range strings.FieldsFunc(v, func(r rune) bool { return r == '\n' || r == '\r' || r == ',' || r == ' ' || r == '\t' }) {
		out = append(out, f)
	}
	return out
}

func (u *UI) inboxSendersAction(c *rc) {
	eid, ok := c.requirePathID("eid")
	if !ok {
		return
	}
	var err error
	msg := ""
	switch c.form("action") {
	case "save":
		rules := domain.SenderRules{
			Receive: domain.SenderRuleLists{Allow: splitEntries(c.form("receiveAllow")), Block: splitEntries(c.form("receiveBlock"))},
			Reply:   domain.SenderRuleLists{Allow: splitEntries(c.form("replyAllow")), Block: splitEntries(c.form("replyBlock"))},
		}
		_, err = c.cl().PutSenderRules(c.ctx(), eid, rules)
		msg = "Sender rules saved; syncing to AgentMail."
	case "check":
		_, err = c.cl().CheckDrift(c.ctx(), eid)
		msg = "Compared with AgentMail."
	case email.DriftTakeProvider, email.DriftWriteOurs:
		_, err = c.cl().ResolveDrift(c.ctx(), eid, c.form("action"))
		msg = "Drift resolved; syncing to AgentMail."
	default:
		msg = "Nothing was changed."
	}
	if e := c.check(err); e != nil {
		msg = "Not saved: " + e.Message
	}
	c.redirect(c.agentmailPath("/inboxes/"+eid+"/senders"), msg)
}

// companyQuarantineData is the company-wide quarantine page.
type companyQuarantineData struct {
	In           inboundData
	Suppressions email.SuppressionPage
	SupErr       *APIError
	Cursor       string
}

func (u *UI) companyQuarantinePage(c *rc) {
	d := &companyQuarantineData{In: inboundData{Reasons: store.QuarantineReasons, Admin: c.caps.Admin,
		Reason: c.r.URL.Query().Get("reason"), Action: c.agentmailPath("/quarantine"), Inboxes: map[string]string{}}}
	q := url.Values{}
	if slices.Contains(store.QuarantineReasons, d.In.Reason) {
		q.Set("reason", d.In.Reason)
	}
	if cur := c.r.URL.Query().Get("cursor"); cur != "" {
		q.Set("cursor", cur)
	}
	var inboxes []domain.EmailEndpointSummary
	parallel(
		func() {
			d.In.QErr = into(c, &d.In.Quarantine)(c.cl().CompanyQuarantine(c.ctx(), c.cid, q))
		},
		func() { d.SupErr = into(c, &d.Suppressions)(c.cl().Suppressions(c.ctx(), c.cid)) },
		func() { _, _ = page(c, c.cl().Inboxes(c.cid), apiclient.Query("includeArchived", "true"), &inboxes) },
	)
	if d.In.QErr != nil && emailDisabled(d.In.QErr) {
		c.failEmail(d.In.QErr)
		return
	}
	for _, ib := range inboxes {
		if ib.Address != nil {
			d.In.Inboxes[ib.ID] = *ib.Address
		}
	}
	c.render(http.StatusOK, "email_quarantine", view{Title: "Quarantine · Email", Nav: emailNav,
		Crumbs: c.emailCrumbs(crumb{"Quarantine", ""}), Data: d})
}

// quarantinedData is one quarantined message's page.
type quarantinedData struct {
	Msg   inbound.QuarantineMessage
	Back  string
	Admin bool
	inboundData
}

func (u *UI) quarantinedPage(c *rc) {
	qid, ok := c.requirePathID("qid")
	if !ok {
		return
	}
	d := &quarantinedData{Back: c.agentmailPath("/quarantine"), Admin: c.caps.Admin}
	if e := into(c, &d.Msg)(c.cl().Quarantined(c.ctx(), qid)); e != nil {
		c.failEmail(e)
		return
	}
	d.Action = c.agentmailPath("/quarantine")
	c.render(http.StatusOK, "email_quarantined", view{Title: "Quarantined email · Email", Nav: emailNav,
		Crumbs: c.emailCrumbs(crumb{"Quarantine", d.Back}, crumb{"Message", ""}), Data: d})
}

func (u *UI) liftSuppression(c *rc) {
	addr := strings.TrimSpace(c.form("address"))
	ep := c.form("endpointId")
	if !store.ValidID(ep) {
		ep = ""
	}
	msg := "Suppression lifted: " + addr + " can be mailed again."
	if e := c.check(c.cl().LiftSuppression(c.ctx(), c.cid, addr, ep)); e != nil {
		msg = "Not lifted: " + e.Message
	}
	c.redirect(c.agentmailPath("/quarantine"), msg)
}
