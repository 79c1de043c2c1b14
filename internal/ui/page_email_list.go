package ui

import (
	"html/template"
	"net/http"
	"net/url"
	"strconv"

	"github.com/paperclipai/paperclipai/internal/apiclient"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/email"
	"github.com/paperclipai/paperclipai/internal/store"
)

// The company Email page: one conversation list across the company's
// inboxes, the view an operator opens each morning ("what came in, and was
// it answered?"). Conversations come from the API's company listing
// (newest activity first, with the state the API derives); the inbox and
// state filters and the pages apply to its newest emailListMax rows.

const (
	emailListMax     = 500
	emailListPerPage = 50
)

// emailListStateOrder lists the states for the filter, most urgent first.
var emailListStateOrder = []string{"delivery_failed", "reply_pending", "agent_working", "awaiting_review", "new", "replied"}

// emailListStateLabels name the states of the email list.
var emailListStateLabels = map[string]string{
	"new": "New", "agent_working": "Agent working", "reply_pending": "Reply pending", "replied": "Replied",
	"delivery_failed": "Delivery failed", "awaiting_review": "Awaiting review",
}

// emailListFuncs are the template functions of the email list.
func emailListFuncs() template.FuncMap {
	return template.FuncMap{
		"emailListStates": func() []string { return emailListStateOrder },
		"emailListState":  func(s string) string { return labelOr(emailListStateLabels, s) },
	}
}

// emailConversation is one row of the email list.
type emailConversation struct {
	email.CompanyConversation
	Assignee string
}

// emailListData is the Email page.
type emailListData struct {
	Rows     []emailConversation
	Inboxes  []domain.EmailEndpointSummary
	Inbox    string
	State    string
	Page     int
	Filtered bool
	PrevHref string
	NextHref string
	From, To int
	Total    int
	PollMS   int
	SelfHref string
	FragHref string
}

// emailListQuery renders the filters and page as a query string.
func emailListQuery(inbox, state string, page int) string {
	v := url.Values{}
	if inbox != "" {
		v.Set("inbox", inbox)
	}
	if state != "" {
		v.Set("state", state)
	}
	if page > 1 {
		v.Set("page", strconv.Itoa(page))
	}
	if len(v) == 0 {
		return ""
	}
	return "?" + v.Encode()
}

func (u *UI) emailListPage(c *rc) {
	q := c.r.URL.Query()
	d := emailListData{Inbox: q.Get("inbox"), State: q.Get("state"), PollMS: u.pollInterval(10000)}
	d.Page, _ = strconv.Atoi(q.Get("page"))
	d.Page = max(d.Page, 1)
	if d.Inbox != "" && !store.ValidID(d.Inbox) {
		d.Inbox = ""
	}
	if _, ok := emailListStateLabels[d.State]; !ok {
		d.State = ""
	}
	d.Filtered = d.Inbox != "" || d.State != ""
	api := url.Values{}
	api.Set("limit", "200")
	if d.Inbox != "" {
		api.Set("endpointId", d.Inbox)
	}
	var rows []emailConversation
	var idx agentIndex
	var e1, e2, e3 *APIError
	parallel(func() { _, idx, e1 = c.agents() },
		func() { rows, e2 = newestConversations(c, api) },
		func() { e3 = all(c, c.cl().Inboxes(c.cid), apiclient.Query("includeArchived", "true"), &d.Inboxes) })
	for _, e := range []*APIError{e2, e3, e1} {
		if e != nil {
			c.failEmail(e)
			return
		}
	}
	var matched []emailConversation
	for _, r := range rows {
		if d.State != "" && r.State != d.State {
			continue
		}
		if r.AssigneeAgentID != nil {
			r.Assignee = idx.Name(*r.AssigneeAgentID)
		}
		matched = append(matched, r)
	}
	d.Total = len(matched)
	start := (d.Page - 1) * emailListPerPage
	if start < len(matched) {
		d.Rows = matched[start:min(start+emailListPerPage, len(matched))]
	}
	base := "/c/" + c.cid + "/email"
	if start+emailListPerPage < len(matched) {
		d.NextHref = base + emailListQuery(d.Inbox, d.State, d.Page+1)
	}
	if d.Page > 1 {
		d.PrevHref = base + emailListQuery(d.Inbox, d.State, d.Page-1)
	}
	d.From, d.To = start+1, start+len(d.Rows)
	d.SelfHref = base + emailListQuery(d.Inbox, d.State, d.Page)
	if len(d.SelfHref) > len(base) {
		d.FragHref = d.SelfHref + "&fragment=conversation-list"
	} else {
		d.FragHref = d.SelfHref + "?fragment=conversation-list"
	}
	c.render(http.StatusOK, "email_list", view{Title: "Email", Nav: "email", Data: d})
}

// newestConversations follows the conversation listing's cursors until it
// has the newest emailListMax conversations (or all of them): the page
// filters by state over those.
func newestConversations(c *rc, api url.Values) ([]emailConversation, *APIError) {
	var rows []emailConversation
	for len(rows) < emailListMax {
		var list []email.CompanyConversation
		next, e := page(c, c.cl().Conversations(c.cid), api, &list)
		if e != nil {
			return nil, e
		}
		for _, r := range list {
			rows = append(rows, emailConversation{CompanyConversation: r})
		}
		if next == "" {
			break
		}
		api.Set("cursor", next)
	}
	return rows[:min(len(rows), emailListMax)], nil
}
