package ui

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/paperclipai/paperclipai/internal/apiclient"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/outbound"
)

// reviewQueueData is the Review queue: held sends across inboxes, oldest
// first.
type reviewQueueData struct {
	Items  []reviewItem
	PollMS int
	Base   string
}

// reviewItem is one held send as the queue and the review page show it.
type reviewItem struct {
	outbound.ListedSend
	Agent     string
	Inbox     string
	Subject   string
	Text      string
	Why       []string
	HeldAt    time.Time
	ExpiresAt time.Time
	Href      string
}

// reviewPageData is one held send's review page.
type reviewPageData struct {
	Item      reviewItem
	Thread    *outbound.ThreadSummary
	Prev      string
	Next      string
	Base      string
	Edit      bool
	Err       *APIError
	Decided   bool
	ToLine    string
	CcLine    string
	BccLine   string
	TaskHref  string
	QueueHref string
}

func (u *UI) reviewRoutes(m *http.ServeMux) {
	m.HandleFunc("GET /c/{cid}/review", u.company(u.reviewQueuePage))
	m.HandleFunc("GET /c/{cid}/review/{pid}", u.company(u.reviewSendPage))
	m.HandleFunc("POST /c/{cid}/review/{pid}", u.company(u.reviewSendSubmit))
	m.HandleFunc("POST /c/{cid}/apps/agentmail/inboxes/{eid}/send-policy", u.company(u.saveSendPolicy))
}

// heldSends reads the company's held sends, oldest first.
func (c *rc) heldSends() ([]reviewItem, *APIError) {
	list, err := c.cl().Sends(c.ctx(), c.cid, apiclient.Query("outcome", string(domain.OutcomeAwaitingReview), "limit", "200"))
	if e := c.check(err); e != nil {
		return nil, e
	}
	_, idx, _ := c.agents()
	var inboxes []domain.EmailEndpointSummary
	_, _ = page(c, c.cl().Inboxes(c.cid), nil, &inboxes)
	addr := map[string]string{}
	for _, ib := range inboxes {
		if ib.Address != nil {
			addr[ib.ID] = *ib.Address
		}
	}
	out := make([]reviewItem, 0, len(list.Items))
	for _, s := range list.Items {
		it := reviewItem{ListedSend: s, Inbox: addr[s.EndpointID], Href: "/c/" + c.cid + "/review/" + s.ID}
		if s.RequestedBy.AgentID != nil {
			it.Agent = idx.Name(*s.RequestedBy.AgentID)
		} else {
			it.Agent = "A board user"
		}
		var req outbound.SendRequest
		_ = json.Unmarshal(s.Request, &req)
		it.Text = req.Text
		if req.Subject != nil {
			it.Subject = *req.Subject
		} else {
			it.Subject = s.TaskTitle
		}
		if s.Review != nil {
			it.HeldAt, it.ExpiresAt = s.Review.HeldAt, s.Review.ExpiresAt
			for _, r := range s.Review.Reasons {
				it.Why = append(it.Why, reviewReason(r))
			}
		}
		out = append(out, it)
	}
	// The listing is newest first; the queue is oldest first.
	slices.Reverse(out)
	return out, nil
}

// reviewReason says why a send was held, in words.
func reviewReason(r string) string {
	switch {
	case r == "review_all":
		return "Every email from this inbox is reviewed"
	case strings.HasPrefix(r, "new_recipient:"):
		return "New recipient " + strings.TrimPrefix(r, "new_recipient:")
	case strings.HasPrefix(r, "not_allowed:"):
		return "Not on the allow list: " + strings.TrimPrefix(r, "not_allowed:")
	}
	return r
}

func (u *UI) reviewQueuePage(c *rc) {
	if c.r.URL.Query().Get("fragment") == "nav-review" {
		// The navigation badge of every company page: its count comes from
		// render (0 for those who may not review), never a refusal here.
		c.render(http.StatusOK, "review", view{Title: "Review", Data: reviewQueueData{}})
		return
	}
	items, e := c.heldSends()
	if e != nil {
		c.fail(e)
		return
	}
	c.render(http.StatusOK, "review", view{Title: "Review", Nav: "review",
		Data: reviewQueueData{Items: items, PollMS: u.pollInterval(5000), Base: "/c/" + c.cid + "/review"}})
}

func (u *UI) reviewSendPage(c *rc) {
	u.renderReview(c, http.StatusOK, c.r.URL.Query().Get("edit") == "1", nil)
}

func (u *UI) renderReview(c *rc, status int, edit bool, apiErr *APIError) {
	pid, ok := c.requirePathID("pid")
	if !ok {
		return
	}
	cur, err := c.cl().SendStatus(c.ctx(), c.cid, pid)
	if e := c.check(err); e != nil {
		c.fail(e)
		return
	}
	items, _ := c.heldSends()
	d := reviewPageData{Base: "/c/" + c.cid + "/review/" + pid, Edit: edit, Err: apiErr, QueueHref: "/c/" + c.cid + "/review",
		TaskHref: "/c/" + c.cid + "/tasks/" + cur.IssueID}
	for i, it := range items {
		if it.ID != pid {
			continue
		}
		d.Item = it
		if i > 0 {
			d.Prev = items[i-1].Href
		}
		if i+1 < len(items) {
			d.Next = items[i+1].Href
		}
	}
	if d.Item.ID == "" {
		// No longer held: show its outcome with a link back.
		d.Decided = true
		d.Item = reviewItem{ListedSend: outbound.ListedSend{SendSummary: cur}}
		var req outbound.SendRequest
		_ = json.Unmarshal(cur.Request, &req)
		d.Item.Text = req.Text
		if req.Subject != nil {
			d.Item.Subject = *req.Subject
		}
	}
	var to, cc, bcc []string
	var req outbound.SendRequest
	_ = json.Unmarshal(cur.Request, &req)
	to, cc, bcc = req.To, req.Cc, req.Bcc
	if len(d.Item.Recipients.To) > 0 {
		to, cc, bcc = d.Item.Recipients.To, d.Item.Recipients.Cc, d.Item.Recipients.Bcc
	}
	d.ToLine, d.CcLine, d.BccLine = strings.Join(to, ", "), strings.Join(cc, ", "), strings.Join(bcc, ", ")
	if th, err := c.cl().Thread(c.ctx(), c.cid, cur.IssueID); c.check(err) == nil {
		d.Thread = th
		if th != nil && d.Item.Inbox == "" && th.Endpoint.Address != nil {
			d.Item.Inbox = *th.Endpoint.Address
		}
	}
	c.render(status, "review_send", view{Title: "Review email", Nav: "review", Data: d})
}

func (u *UI) reviewSendSubmit(c *rc) {
	pid, ok := c.requirePathID("pid")
	if !ok {
		return
	}
	var body outbound.ReviewInput
	flash := ""
	switch c.form("action") {
	case "approve":
		body.Action = "approve"
		flash = "Approved: the email is being sent."
	case "edit":
		text, to, cc := c.form("text"), splitAddresses(c.form("to")), splitAddresses(c.form("cc"))
		body = outbound.ReviewInput{Action: "approve", Text: &text, Subject: opt(c.form("subject")), To: &to, Cc: &cc}
		flash = "Edited and approved: the email is being sent."
	case "reject":
		body = outbound.ReviewInput{Action: "reject", Reason: c.form("reason")}
		flash = "Rejected: the agent was told why."
	default:
		u.renderReview(c, http.StatusBadRequest, false, &APIError{Status: http.StatusBadRequest, Message: "Choose Approve, Edit and approve, or Reject."})
		return
	}
	if _, err := c.cl().Review(c.ctx(), c.cid, pid, body); err != nil {
		e := c.check(err)
		u.renderReview(c, e.Status, c.form("action") == "edit", e)
		return
	}
	next := c.form("next")
	if next == "" || !strings.HasPrefix(next, "/c/"+c.cid+"/") {
		next = "/c/" + c.cid + "/review/" + pid
	}
	c.redirect(next, flash)
}

// splitAddresses parses a comma- or newline-separated address field.
func splitAddresses(s string) []string {
	out := []string{}
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == '\n' || r == ';' }) {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// saveSendPolicy saves the inbox page's Send policy form.
func (u *UI) saveSendPolicy(c *rc) {
	eid, ok := c.requirePathID("eid")
	if !ok {
		return
	}
	hours, _ := strconv.Atoi(strings.TrimSpace(c.form("reviewExpiresHours")))
	p := outbound.SendPolicy{Review: c.form("review"), AllowedRecipients: splitAddresses(c.form("allowedRecipients")),
		BlockedRecipients: splitAddresses(c.form("blockedRecipients")), ReviewExpiresHours: hours}
	if _, err := c.cl().PutSendPolicy(c.ctx(), eid, p); err != nil {
		e := c.check(err)
		ib, gerr := c.cl().Inbox(c.ctx(), eid)
		if ge := c.check(gerr); ge != nil {
			c.fail(ge)
			return
		}
		_, idx, _ := c.agents()
		d := u.newInboxData(c, ib, idx, "settings")
		d.Policy, d.PolicyErr = &p, e
		u.renderInbox(c, e.Status, d)
		return
	}
	c.redirect(c.agentmailPath("/inboxes/"+eid+"/settings"), "Send policy saved.")
}
