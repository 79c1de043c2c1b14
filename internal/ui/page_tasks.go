package ui

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/paperclipai/paperclipai/internal/apiclient"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/store"
)

const tasksPerPage = 50

// taskSorts are the Tasks list's orders with their labels.
var taskSorts = []struct{ Value, Label string }{{"updated", "Last updated"}, {"created", "Newest"}, {"priority", "Priority"}}

type taskFilter struct {
	Status, Assignee, Origin, Inbox, Sort string
	// Cursor continues the list after an earlier page (the API's cursor).
	Cursor string
}

// query renders the filter as a query string (cursor included when set).
func (f taskFilter) query(cursor string) string {
	v := url.Values{}
	for _, kv := range [][2]string{{"status", f.Status}, {"assignee", f.Assignee}, {"origin", f.Origin}, {"inbox", f.Inbox},
		{"sort", f.Sort}, {"cursor", cursor}} {
		if kv[1] != "" {
			v.Set(kv[0], kv[1])
		}
	}
	if len(v) == 0 {
		return ""
	}
	return "?" + v.Encode()
}

type tasksData struct {
	Tasks     []domain.Issue
	Agents    []domain.Agent
	AgentIdx  agentIndex
	Inboxes   []domain.EmailEndpointSummary
	Sorts     []struct{ Value, Label string }
	Filter    taskFilter
	Filtered  bool
	FirstHref string
	NextHref  string
	PollMS    int
	SelfHref  string
	FragHref  string
	// Pending holds the tasks with a send not out yet ("Reply pending").
	Pending map[string]bool
}

// PendingSend reports whether a task's reply is still queued, retrying or
// uncertain.
func (d tasksData) PendingSend(id string) bool { return d.Pending[id] }

// pendingSends reads which tasks have a send that is not out yet, from
// the company's sends listing (managers only; for anyone else, or with
// email turned off, the lists simply carry no marker).
func pendingSends(c *rc) map[string]bool {
	out := map[string]bool{}
	if !c.caps.Manager {
		return out
	}
	for _, o := range []domain.SendOutcome{domain.OutcomeQueued, domain.OutcomeUncertain} {
		list, err := c.cl().Sends(c.ctx(), c.cid, apiclient.Query("limit", "200", "outcome", string(o)))
		if c.check(err) != nil {
			continue
		}
		for _, it := range list.Items {
			out[it.IssueID] = true
		}
	}
	return out
}

// IsEmailTask reports whether a task came from email.
func (tasksData) IsEmailTask(t domain.Issue) bool { return isEmailTask(t) }

func isEmailTask(t domain.Issue) bool {
	return t.OriginKind == "chat_channel" && strings.HasPrefix(t.OriginID, "email")
}

func (u *UI) tasksPage(c *rc) {
	q := c.r.URL.Query()
	f := taskFilter{Status: q.Get("status"), Assignee: q.Get("assignee"), Origin: q.Get("origin"), Inbox: q.Get("inbox"),
		Sort: q.Get("sort"), Cursor: q.Get("cursor")}
	if f.Status != "" && !slices.Contains(taskStatusOrder, f.Status) {
		f.Status = ""
	}
	if f.Assignee != "" && !store.ValidID(f.Assignee) {
		f.Assignee = ""
	}
	if f.Inbox != "" && !store.ValidID(f.Inbox) {
		f.Inbox = ""
	}
	if f.Origin != "email" && f.Origin != "other" {
		f.Origin = ""
	}
	if !slices.Contains(store.IssueSorts, f.Sort) {
		f.Sort = "updated"
	}
	d := tasksData{Filter: f, Sorts: taskSorts, Filtered: f.Status != "" || f.Assignee != "" || f.Origin != "" || f.Inbox != "",
		PollMS: u.pollInterval(10000)}
	api := url.Values{}
	api.Set("limit", strconv.Itoa(tasksPerPage))
	api.Set("sort", f.Sort)
	for k, v := range map[string]string{"status": f.Status, "assigneeAgentId": f.Assignee, "origin": f.Origin, "inboxId": f.Inbox,
		"cursor": f.Cursor} {
		if v != "" {
			api.Set(k, v)
		}
	}
	var e1, e2 *APIError
	var next string
	parallel(func() { d.Agents, d.AgentIdx, e1 = c.agents() },
		func() { next, e2 = page(c, c.cl().Issues(c.cid), api, &d.Tasks) },
		func() { _ = all(c, c.cl().Inboxes(c.cid), nil, &d.Inboxes) },
		func() { d.Pending = pendingSends(c) })
	for _, e := range []*APIError{e1, e2} {
		if e != nil {
			c.fail(e)
			return
		}
	}
	base := "/c/" + c.cid + "/tasks"
	if next != "" {
		d.NextHref = base + f.query(next)
	}
	if f.Cursor != "" {
		d.FirstHref = base + f.query("")
	}
	d.SelfHref = base + f.query(f.Cursor)
	sep := "?"
	if strings.Contains(d.SelfHref, "?") {
		sep = "&"
	}
	d.FragHref = d.SelfHref + sep + "fragment=task-list"
	c.render(http.StatusOK, "tasks", view{Title: "Tasks", Nav: "tasks", Data: d})
}

type taskForm struct {
	Title, Description, Status, Priority, Assignee, Project, Parent string
	// Wake: wake the assignee on the new task right away (ticked by
	// default). Assigning alone starts nothing; the form says so.
	Wake bool
}

type newTaskData struct {
	Form     taskForm
	Agents   []domain.Agent
	Projects []domain.Project
	Parents  []domain.Issue
	Err      *APIError
}

func (u *UI) newTaskPage(c *rc) {
	f := taskForm{Status: "todo", Priority: "medium", Parent: c.r.URL.Query().Get("parent"),
		Assignee: c.r.URL.Query().Get("assignee"), Wake: true}
	u.renderNewTask(c, http.StatusOK, f, nil)
}

func (u *UI) renderNewTask(c *rc, status int, f taskForm, formErr *APIError) {
	if !c.caps.Write {
		c.forbidden(c.routeAction(), "")
		return
	}
	d := newTaskData{Form: f, Err: formErr}
	var e *APIError
	if d.Agents, _, e = c.agents(); e != nil {
		c.fail(e)
		return
	}
	_ = all(c, c.cl().Projects(c.cid), nil, &d.Projects)
	_, _ = page(c, c.cl().Issues(c.cid), apiclient.Query("limit", "100"), &d.Parents)
	if f.Parent != "" && !slices.ContainsFunc(d.Parents, func(i domain.Issue) bool { return i.ID == f.Parent }) && store.ValidID(f.Parent) {
		if p, err := c.cl().Issue(c.ctx(), f.Parent); c.check(err) == nil && p.CompanyID == c.cid {
			d.Parents = append([]domain.Issue{p}, d.Parents...)
		}
	}
	c.render(status, "task_new", view{Title: "New task", Nav: "tasks",
		Crumbs: []crumb{{"Tasks", "/c/" + c.cid + "/tasks"}, {"New task", ""}}, Data: d})
}

func (c *rc) form(name string) string { return c.r.PostFormValue(name) }

func (u *UI) createTask(c *rc) {
	f := taskForm{Title: c.form("title"), Description: c.form("description"), Status: c.form("status"),
		Priority: c.form("priority"), Assignee: c.form("assignee"), Project: c.form("project"), Parent: c.form("parent"),
		Wake: c.form("wake") != ""}
	body := apiclient.IssueInput{Title: &f.Title, Description: &f.Description, Status: &f.Status, Priority: &f.Priority,
		AssigneeAgentID: opt(f.Assignee), ProjectID: opt(f.Project), ParentID: opt(f.Parent)}
	t, err := c.cl().CreateIssue(c.ctx(), c.cid, body)
	if e := c.check(err); e != nil {
		u.renderNewTask(c, e.Status, f, e)
		return
	}
	flash := flashTaskCreated
	if f.Assignee != "" && f.Wake {
		// Assigning wakes the agent, as upstream does on assignment; the
		// task exists either way, so a refused wake is only reported.
		run, err := c.cl().Wake(c.ctx(), f.Assignee, apiclient.Wakeup{Reason: "assignment", IssueID: t.ID})
		flash = wakeFlash(flashTaskCreated+" ", run, c.check(err))
	}
	c.redirect(fmt.Sprintf("/c/%s/tasks/%s", c.cid, t.ID), flash)
}
