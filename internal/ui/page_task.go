package ui

import (
	"fmt"
	"net/http"

	"github.com/paperclipai/paperclipai/internal/apiclient"
	"github.com/paperclipai/paperclipai/internal/domain"
)

type taskData struct {
	Task        domain.Issue
	Parent      *domain.Issue
	Comments    []domain.Comment
	Attachments []domain.Attachment
	Runs        []domain.Run
	Children    []domain.Issue
	Agents      []domain.Agent
	AgentIdx    agentIndex
	Assignee    *domain.Agent
	ProjectName string
	Authors     map[string]string
	Active      bool
	Email       bool
	MaxUpload   int64

	HeaderPoll, TimelinePoll, RunsPoll int
	Base                               string

	// Re-render state after a failed POST.
	CommentBody string
	CommentWake bool
	CommentErr  *APIError
	DetailsErr  *APIError
	UploadErr   *APIError
	WakeErr     *APIError

	// EmailView is the task's email conversation (page_task_email.go);
	// nil for an ordinary task. Resolve is a failed resolve's re-render state.
	EmailView *taskEmailView
	Resolve   *taskResolveState
}

// Author names a comment's author: member email, "Local board", the agent
// or "Paperclip" for system comments.
func (d taskData) Author(cm domain.Comment) string {
	switch cm.AuthorKind {
	case "agent":
		return d.AgentIdx.Name(cm.AuthorAgentID)
	case "user":
		if n, ok := d.Authors[cm.AuthorUserID]; ok {
			return n
		}
		return "Local board"
	}
	return "Paperclip"
}

// loadTask reads the path's task and checks it belongs to the company.
func (c *rc) loadTask() (domain.Issue, bool) {
	return loadOwned(c, "tid", c.cl().Issue, func(t *domain.Issue) string { return t.CompanyID })
}

func (u *UI) taskPage(c *rc) {
	t, ok := c.loadTask()
	if !ok {
		return
	}
	u.renderTask(c, http.StatusOK, t, taskData{CommentWake: true})
}

func (u *UI) renderTask(c *rc, status int, t domain.Issue, d taskData) {
	d.Task = t
	d.Base = fmt.Sprintf("/c/%s/tasks/%s", c.cid, t.ID)
	d.Email = isEmailTask(t)
	d.MaxUpload = u.d.Config.AttachmentMaxBytes
	frag := c.r.URL.Query().Get("fragment")
	need := func(names ...string) bool {
		if frag == "" {
			return true
		}
		for _, n := range names {
			if n == frag {
				return true
			}
		}
		return false
	}
	var errs [5]*APIError
	var members []domain.Membership
	var projects []domain.Project
	var fns []func()
	fns = append(fns, func() { d.Agents, d.AgentIdx, errs[0] = c.agents() })
	if need("task-runs", "task-header", "task-timeline") {
		fns = append(fns, func() {
			_, errs[1] = page(c, c.cl().Runs(c.cid), apiclient.Query("issueId", t.ID, "limit", "20"), &d.Runs)
		})
	}
	if need("task-timeline") {
		fns = append(fns, func() { errs[2] = all(c, c.cl().Comments(t.ID), nil, &d.Comments) },
			func() { _ = all(c, c.cl().Members(c.cid), nil, &members) })
	}
	if frag == "" {
		fns = append(fns, func() { errs[3] = all(c, c.cl().Attachments(t.ID), nil, &d.Attachments) },
			func() {
				_, errs[4] = page(c, c.cl().Issues(c.cid), apiclient.Query("parentId", t.ID, "limit", "100"), &d.Children)
			})
		if t.ParentID != "" {
			fns = append(fns, func() {
				if p, err := c.cl().Issue(c.ctx(), t.ParentID); c.check(err) == nil {
					d.Parent = &p
				}
			})
		}
		if t.ProjectID != "" {
			fns = append(fns, func() { _, _ = page(c, c.cl().Projects(c.cid), nil, &projects) })
		}
	}
	emailLoads, emailFinish := u.taskEmailLoader(c, t, &d, frag)
	fns = append(fns, emailLoads...)
	// Independent reads run concurrently (see overview).
	parallel(fns...)
	for _, e := range errs {
		if e != nil {
			c.fail(e)
			return
		}
	}
	if a, ok := d.AgentIdx[t.AssigneeAgentID]; ok {
		d.Assignee = &a
	}
	for _, r := range d.Runs {
		if !r.Terminal() {
			d.Active = true
		}
	}
	d.Authors = map[string]string{}
	for _, m := range members {
		d.Authors[m.UserID] = personName(m.Email)
	}
	for _, p := range projects {
		if p.ID == t.ProjectID {
			d.ProjectName = p.Name
		}
	}
	d.HeaderPoll, d.TimelinePoll, d.RunsPoll = u.pollInterval(10000), u.pollInterval(10000), u.pollInterval(15000)
	if d.Active {
		d.HeaderPoll, d.TimelinePoll, d.RunsPoll = u.pollInterval(3000), u.pollInterval(3000), u.pollInterval(3000)
	}
	if !emailFinish() {
		return
	}
	c.render(status, "task", view{Title: t.Title, Nav: "tasks",
		Crumbs: []crumb{{"Tasks", "/c/" + c.cid + "/tasks"}, {t.Title, ""}}, Data: d})
}

func (u *UI) updateTask(c *rc) {
	t, ok := c.loadTask()
	if !ok {
		return
	}
	status, priority, assignee := c.form("status"), c.form("priority"), c.form("assignee")
	_, err := c.cl().PatchIssue(c.ctx(), t.ID, apiclient.IssueInput{Status: &status, Priority: &priority, AssigneeAgentID: &assignee})
	if e := c.check(err); e != nil {
		if e.Status == http.StatusNotFound {
			c.fail(e)
			return
		}
		if c.refusedUnseen(e, c.caps.Write) {
			return
		}
		u.renderTask(c, e.Status, t, taskData{DetailsErr: e, CommentWake: true})
		return
	}
	c.redirect(fmt.Sprintf("/c/%s/tasks/%s", c.cid, t.ID), flashTaskSaved)
}

func (u *UI) addComment(c *rc) {
	t, ok := c.loadTask()
	if !ok {
		return
	}
	body := c.form("body")
	wake := c.form("wake") == "on"
	cm, err := c.cl().CreateComment(c.ctx(), t.ID, body)
	if e := c.check(err); e != nil {
		if e.Status == http.StatusNotFound {
			c.fail(e)
			return
		}
		if c.refusedUnseen(e, c.caps.Write) {
			return
		}
		u.renderTask(c, e.Status, t, taskData{CommentErr: e, CommentBody: body, CommentWake: wake})
		return
	}
	flash := flashCommentAdded
	if wake && t.AssigneeAgentID != "" {
		run, err := c.cl().Wake(c.ctx(), t.AssigneeAgentID, apiclient.Wakeup{Reason: "comment", IssueID: t.ID,
			IdempotencyKey: "ui-comment:" + cm.ID, CommentID: cm.ID})
		flash = wakeFlash(flashCommentAdded+" ", run, c.check(err))
	}
	c.redirect(fmt.Sprintf("/c/%s/tasks/%s#comment-%s", c.cid, t.ID, cm.ID), flash)
}

// wakeFlash describes a wake's outcome for the flash message.
func wakeFlash(prefix string, run domain.Run, e *APIError) string {
	switch {
	case e != nil:
		return prefix + "The agent was not woken: " + e.Message
	case run.Status == domain.RunRefused:
		return prefix + "Wake refused: " + labelOr(refusalLabels, run.RefusalReason) + "."
	}
	return prefix + "Agent woken (run " + shortID(run.ID) + ")."
}

func (u *UI) wakeForTask(c *rc) {
	t, ok := c.loadTask()
	if !ok {
		return
	}
	if t.AssigneeAgentID == "" {
		c.redirect(fmt.Sprintf("/c/%s/tasks/%s", c.cid, t.ID), "This task has no agent to wake.")
		return
	}
	run, err := c.cl().Wake(c.ctx(), t.AssigneeAgentID, apiclient.Wakeup{Reason: "manual", IssueID: t.ID})
	e := c.check(err)
	if e != nil && (e.Status == http.StatusForbidden || e.Status == http.StatusNotFound) {
		c.fail(e)
		return
	}
	c.redirect(fmt.Sprintf("/c/%s/tasks/%s#task-runs", c.cid, t.ID), wakeFlash("", run, e))
}
