package ui

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"

	"github.com/paperclipai/paperclipai/internal/apiclient"
	"github.com/paperclipai/paperclipai/internal/domain"
)

type projectsData struct {
	Projects     []domain.Project
	Environments []domain.Environment
	Project      struct{ Name, Strategy, Path string }
	Env          struct{ Name, Driver string }
	ProjectErr   *APIError
	EnvErr       *APIError
}

func (u *UI) projectsPage(c *rc) { u.renderProjects(c, http.StatusOK, projectsData{}) }

func (u *UI) renderProjects(c *rc, status int, d projectsData) {
	if e := all(c, c.cl().Projects(c.cid), nil, &d.Projects); e != nil {
		c.fail(e)
		return
	}
	if e := into(c, &d.Environments)(c.cl().Environments(c.ctx(), c.cid)); e != nil {
		c.fail(e)
		return
	}
	if d.Env.Driver == "" {
		d.Env.Driver = "local"
	}
	c.render(status, "projects", view{Title: "Projects & environments", Nav: "projects", Data: d})
}

func (u *UI) createProject(c *rc) {
	var d projectsData
	d.Project.Name, d.Project.Strategy, d.Project.Path = c.form("name"), c.form("strategy"), strings.TrimSpace(c.form("path"))
	body := apiclient.NewProject{Name: d.Project.Name}
	if d.Project.Strategy != "" {
		body.Workspace = &domain.ProjectWorkspace{Strategy: d.Project.Strategy, Path: d.Project.Path}
	}
	c.submit(func(ctx context.Context) error {
		_, err := c.cl().CreateProject(ctx, c.cid, body)
		return err
	}, c.caps.Write, func(e *APIError) {
		d.ProjectErr = e
		u.renderProjects(c, e.Status, d)
	}, "/c/"+c.cid+"/projects", flashProjectCreated)
}

func (u *UI) createEnvironment(c *rc) {
	var d projectsData
	d.Env.Name, d.Env.Driver = c.form("name"), c.form("driver")
	body := apiclient.NewEnvironment{Name: d.Env.Name, Driver: d.Env.Driver}
	if d.Env.Driver == "sandbox" {
		body.Provider = "bubblewrap"
	}
	c.submit(func(ctx context.Context) error {
		_, err := c.cl().CreateEnvironment(ctx, c.cid, body)
		return err
	}, c.caps.Write, func(e *APIError) {
		d.EnvErr = e
		u.renderProjects(c, e.Status, d)
	}, "/c/"+c.cid+"/projects", flashEnvCreated)
}

type activityRow struct {
	domain.Activity
	Actor, Label, Entity, Href, Details string
	// Verb and Object make the entry a sentence: "{Actor} {Verb} {Object}"
	// (the object linked to Href when it has a page).
	Verb, Object string
}

// entityLabels name the kinds of thing an audit entry is about.
var entityLabels = map[string]string{"issue": "Task", "agent": "Agent", "heartbeat_run": "Run", "run": "Run", "comment": "Comment",
	"attachment": "Attachment", "company": "Company", "project": "Project", "environment": "Environment", "secret": "Secret",
	"email_endpoint": "Inbox", "email_connection": "AgentMail connection", "email_publication": "Email", "email_delivery": "Email",
	"action_policy": "Action policy", "board_key": "Board key", "membership": "Member", "instance": "Instance"}

// actionLabel names an audit action: its label, or for an action without
// one its words ("email.bounce_noted" → "Email bounce noted"), never the
// internal name.
func actionLabel(action string) string {
	if v, ok := activityLabels[action]; ok {
		return v
	}
	words := strings.Fields(strings.NewReplacer(".", " ", "_", " ").Replace(action))
	if len(words) == 0 {
		return action
	}
	words[0] = strings.ToUpper(words[0][:1]) + words[0][1:]
	return strings.Join(words, " ")
}

// activityVerbs phrase an action as the verb of a sentence whose object is
// its entity ("Mail Assistant sent an email on Hello"). Actions without one
// read "{Actor}: {label}".
var activityVerbs = map[string]string{
	"issue.created": "created", "issue.updated": "updated", "issue.reopened": "reopened (a new email arrived on)",
	"issue.comment_added": "commented on", "issue.attachment_added": "attached a file to",
	"email.received": "received an email on", "email.queued": "queued an email on", "email.sent": "sent an email on",
	"email.failed": "could not send an email on", "email.uncertain": "lost confirmation of an email on",
	"email.resolved": "resolved a delivery on", "heartbeat.wakeup": "woke", "heartbeat.refused": "was refused a wake of",
	"heartbeat.finished": "finished", "agent.created": "created agent", "agent.updated": "updated agent",
	"email_endpoint.connected": "connected inbox", "email_endpoint.pause": "paused inbox", "email_endpoint.resume": "resumed inbox",
	"email_endpoint.reconnect": "reconnected inbox", "email_endpoint.remove": "disconnected inbox",
}

type activityData struct {
	Rows       []activityRow
	EmailOnly  bool
	Filter     activityFilter
	Kinds      []struct{ Value, Label string }
	Actors     []struct{ Value, Label string }
	NextHref   string
	FirstHref  string
	ExportCSV  string
	ExportJSON string
	Err        *APIError
}

// activityFilter is the Activity page's filter state (in its URL).
type activityFilter struct{ Kind, Actor, Task, Since, Until string }

// activityKinds are the action kinds the Activity page filters by.
var activityKinds = []struct{ Value, Label string }{{"issue.", "Tasks"}, {"email", "Email"}, {"heartbeat.", "Agent runs"},
	{"agent.", "Agents"}, {"company.", "Company and members"}, {"secret.", "Secrets"}, {"action_policy.,policy.", "Policies"}}

// apiQuery is the filter as the activity API's query.
func (f activityFilter) apiQuery() url.Values {
	v := url.Values{}
	if f.Kind != "" {
		kind := f.Kind
		if kind == "email" {
			kind = "email.,email_endpoint."
		}
		v.Set("action", kind)
	}
	for k, val := range map[string]string{"actor": f.Actor, "taskId": f.Task, "since": f.Since, "until": f.Until} {
		if val != "" {
			v.Set(k, val)
		}
	}
	return v
}

// pageQuery is the filter as the page's own query (cursor when set).
func (f activityFilter) pageQuery(cursor string) string {
	v := url.Values{}
	for k, val := range map[string]string{"kind": f.Kind, "actor": f.Actor, "task": f.Task, "since": f.Since, "until": f.Until,
		"cursor": cursor} {
		if val != "" {
			v.Set(k, val)
		}
	}
	if len(v) == 0 {
		return ""
	}
	return "?" + v.Encode()
}

func (u *UI) activityPage(c *rc) {
	q := c.r.URL.Query()
	f := activityFilter{Kind: q.Get("kind"), Actor: q.Get("actor"), Task: q.Get("task"), Since: q.Get("since"), Until: q.Get("until")}
	if q.Get("email") == "1" {
		f.Kind = "email"
	}
	api := f.apiQuery()
	api.Set("limit", "100")
	if cur := q.Get("cursor"); cur != "" {
		api.Set("cursor", cur)
	}
	var list []domain.Activity
	next, apiErr := page(c, c.cl().Activity(c.cid), api, &list)
	if apiErr != nil && apiErr.Status != http.StatusBadRequest {
		c.fail(apiErr)
		return
	}
	agents, idx, _ := c.agents()
	var members []domain.Membership
	_ = all(c, c.cl().Members(c.cid), nil, &members)
	emails := map[string]string{}
	for _, m := range members {
		emails[m.UserID] = personName(m.Email)
	}
	var tasks []domain.Issue
	_, _ = page(c, c.cl().Issues(c.cid), apiclient.Query("limit", "200"), &tasks)
	titles := map[string]string{}
	for _, t := range tasks {
		titles[t.ID] = t.Title
	}
	d := activityData{EmailOnly: f.Kind == "email", Filter: f, Kinds: activityKinds, Err: apiErr}
	for _, m := range members {
		d.Actors = append(d.Actors, struct{ Value, Label string }{m.UserID, personName(m.Email)})
	}
	for _, a := range agents {
		d.Actors = append(d.Actors, struct{ Value, Label string }{a.ID, a.Name})
	}
	base := "/c/" + c.cid + "/activity"
	if next != "" {
		d.NextHref = base + f.pageQuery(next)
	}
	if q.Get("cursor") != "" {
		d.FirstHref = base + f.pageQuery("")
	}
	exp := f.apiQuery()
	exp.Set("format", "csv")
	d.ExportCSV = "/api/companies/" + c.cid + "/activity/export?" + exp.Encode()
	exp.Set("format", "jsonl")
	d.ExportJSON = "/api/companies/" + c.cid + "/activity/export?" + exp.Encode()
	for _, a := range list {
		row := activityRow{Activity: a, Label: actionLabel(a.Action), Entity: labelOr(entityLabels, a.EntityType), Details: prettyJSON(a.Details)}
		switch a.ActorKind {
		case "agent":
			row.Actor = idx.Name(a.ActorID)
		case "user", "board":
			row.Actor = emails[a.ActorID]
			if row.Actor == "" {
				row.Actor = "Local board"
			}
		default:
			row.Actor = "Paperclip"
		}
		switch a.EntityType {
		case "issue":
			row.Href = "/c/" + c.cid + "/tasks/" + a.EntityID
		case "agent":
			row.Href = "/c/" + c.cid + "/agents/" + a.EntityID
		case "heartbeat_run", "run":
			row.Href = "/c/" + c.cid + "/runs/" + a.EntityID
		case "comment", "attachment":
			var det struct {
				IssueID string `json:"issueId"`
			}
			if json.Unmarshal(a.Details, &det) == nil && det.IssueID != "" {
				row.Href = "/c/" + c.cid + "/tasks/" + det.IssueID
			}
		}
		row.Verb = activityVerbs[a.Action]
		switch {
		case strings.HasPrefix(row.Href, "/c/"+c.cid+"/tasks/") && titles[strings.TrimPrefix(row.Href, "/c/"+c.cid+"/tasks/")] != "":
			row.Object = titles[strings.TrimPrefix(row.Href, "/c/"+c.cid+"/tasks/")]
		case a.EntityType == "agent" && idx.Name(a.EntityID) != "":
			row.Object = idx.Name(a.EntityID)
		case a.EntityType == "heartbeat_run" || a.EntityType == "run":
			row.Object = "run " + shortID(a.EntityID)
		case a.EntityID != "":
			row.Object = strings.ReplaceAll(a.EntityType, "_", " ") + " " + shortID(a.EntityID)
		}
		d.Rows = append(d.Rows, row)
	}
	c.render(http.StatusOK, "activity", view{Title: "Activity", Nav: "activity", Data: d})
}

type membersData struct {
	Members           []domain.Membership
	Member            struct{ Email, Role string }
	Manage            bool
	KeyName           string
	KeyUser           string
	Token             string
	TokenFor          string
	MemberErr, KeyErr *APIError
	// RevokeErr is a refused revoke, shown above the key list.
	RevokeErr *APIError
	// Keys are the company's active board keys the viewer may see (owners
	// and admins: all; others: their own), with their owners' emails.
	Keys   []domain.BoardAPIKey
	People map[string]string
	// Owners counts the owners: the last one is offered no role change
	// and no Remove (the API refuses both).
	Owners int
}

func (u *UI) membersPage(c *rc) { u.renderMembers(c, http.StatusOK, membersData{}) }

func (u *UI) renderMembers(c *rc, status int, d membersData) {
	var keysErr *APIError
	var e *APIError
	parallel(func() { e = all(c, c.cl().Members(c.cid), nil, &d.Members) },
		func() { keysErr = into(c, &d.Keys)(c.cl().BoardKeys(c.ctx(), c.cid)) })
	if e != nil {
		c.fail(e)
		return
	}
	if keysErr != nil {
		d.Keys = nil // a viewer without key access simply sees no list
	}
	d.People = map[string]string{}
	for _, m := range d.Members {
		d.People[m.UserID] = personName(m.Email)
		if m.Role == domain.RoleOwner {
			d.Owners++
		}
	}
	if d.Member.Role == "" {
		d.Member.Role = "member"
	}
	c.render(status, "members", view{Title: "Members", Nav: "members", Data: d})
}

func (u *UI) addMember(c *rc) {
	var d membersData
	d.Member.Email, d.Member.Role = strings.TrimSpace(c.form("email")), c.form("role")
	d.Manage = c.form("manage") == "on"
	perms := []string{}
	if d.Manage {
		perms = append(perms, domain.PermManageConnections)
	}
	body := apiclient.AddMember{Email: d.Member.Email, Role: d.Member.Role, Permissions: perms}
	c.submit(func(ctx context.Context) error {
		_, err := c.cl().AddMember(ctx, c.cid, body)
		return err
	}, c.caps.Admin, func(e *APIError) {
		d.MemberErr = e
		u.renderMembers(c, e.Status, d)
	}, "/c/"+c.cid+"/members", flashMemberAdded)
}

// createBoardKey shows the new token once, on the response page itself
// (201, no-store; not a redirect, so the token never lands in a URL or a
// cookie).
func (u *UI) createBoardKey(c *rc) {
	var d membersData
	d.KeyName, d.KeyUser = strings.TrimSpace(c.form("name")), c.form("user")
	out, err := c.cl().CreateBoardKey(c.ctx(), c.cid, d.KeyUser, d.KeyName)
	if e := c.check(err); e != nil {
		if c.refusedUnseen(e, c.caps.Write) {
			return
		}
		d.KeyErr = e
		u.renderMembers(c, e.Status, d)
		return
	}
	d.Token = out.Token
	d.TokenFor = out.Name
	u.d.Redact(out.Token)
	u.renderMembers(c, http.StatusCreated, d)
}

// removeMember removes a member (owners and admins; the API keeps the last
// owner and lets only owners remove owners).
func (u *UI) removeMember(c *rc) {
	uid, ok := c.pathUUID("uid")
	if !ok {
		c.notFound()
		return
	}
	if e := c.check(c.cl().RemoveMember(c.ctx(), c.cid, uid)); e != nil {
		if c.refusedUnseen(e, c.caps.Admin) {
			return
		}
		u.renderMembers(c, e.Status, membersData{MemberErr: e})
		return
	}
	c.redirect("/c/"+c.cid+"/members", flashMemberRemoved)
}

// revokeBoardKey revokes a board key (its owner, or an instance
// administrator; sessions signed in with it end with it).
func (u *UI) revokeBoardKey(c *rc) {
	kid, ok := c.pathUUID("kid")
	if !ok {
		c.notFound()
		return
	}
	if e := c.check(c.cl().RevokeBoardKey(c.ctx(), kid)); e != nil {
		if c.refusedUnseen(e, true) {
			return
		}
		u.renderMembers(c, e.Status, membersData{RevokeErr: e})
		return
	}
	c.redirect("/c/"+c.cid+"/members", flashKeyRevoked)
}
