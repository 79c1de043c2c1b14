package ui

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"

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
	if e := apiAll(c, "/companies/"+c.cid+"/projects", &d.Projects); e != nil {
		c.fail(e)
		return
	}
	if e := c.api("GET", "/companies/"+c.cid+"/environments", nil, &d.Environments); e != nil {
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
	body := map[string]any{"name": d.Project.Name}
	if d.Project.Strategy != "" {
		body["workspace"] = map[string]string{"strategy": d.Project.Strategy, "path": d.Project.Path}
	}
	c.submit("/companies/"+c.cid+"/projects", body, c.caps.Write, func(e *APIError) {
		d.ProjectErr = e
		u.renderProjects(c, e.Status, d)
	}, "/c/"+c.cid+"/projects", flashProjectCreated)
}

func (u *UI) createEnvironment(c *rc) {
	var d projectsData
	d.Env.Name, d.Env.Driver = c.form("name"), c.form("driver")
	body := map[string]string{"name": d.Env.Name, "driver": d.Env.Driver}
	if d.Env.Driver == "sandbox" {
		body["provider"] = "bubblewrap"
	}
	c.submit("/companies/"+c.cid+"/environments", body, c.caps.Write, func(e *APIError) {
		d.EnvErr = e
		u.renderProjects(c, e.Status, d)
	}, "/c/"+c.cid+"/projects", flashEnvCreated)
}

type activityRow struct {
	domain.Activity
	Actor, Label, Entity, Href, Details string
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
	next, apiErr := c.apiPage("/companies/"+c.cid+"/activity?"+api.Encode(), &list)
	if apiErr != nil && apiErr.Status != http.StatusBadRequest {
		c.fail(apiErr)
		return
	}
	agents, idx, _ := c.agents()
	var members []domain.Membership
	_ = apiAll(c, "/companies/"+c.cid+"/members", &members)
	emails := map[string]string{}
	for _, m := range members {
		emails[m.UserID] = personName(m.Email)
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
}

func (u *UI) membersPage(c *rc) { u.renderMembers(c, http.StatusOK, membersData{}) }

func (u *UI) renderMembers(c *rc, status int, d membersData) {
	if e := apiAll(c, "/companies/"+c.cid+"/members", &d.Members); e != nil {
		c.fail(e)
		return
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
	body := map[string]any{"email": d.Member.Email, "role": d.Member.Role, "permissions": perms}
	c.submit("/companies/"+c.cid+"/members", body, c.caps.Admin, func(e *APIError) {
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
	body := map[string]string{"name": d.KeyName}
	if d.KeyUser != "" {
		body["userId"] = d.KeyUser
	}
	var out struct {
		domain.BoardAPIKey
		Token string `json:"token"`
	}
	if e := c.api("POST", "/companies/"+c.cid+"/board-keys", body, &out); e != nil {
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
