package ui

import (
	"net/http"

	"github.com/paperclipai/paperclipai/internal/apiclient"
	"github.com/paperclipai/paperclipai/internal/domain"
)

// The trust settings page (/c/{cid}/agents/{aid}/trust): an agent's preset,
// its work boundary and, for low trust, the runtime checklist. Other pages
// (the email wizard, an inbox's settings) link here with ?return=<UI path>
// and get the operator back after saving or cancelling.

type trustData struct {
	Agent    domain.Agent
	Preset   string
	Kind     string
	Project  string
	Task     string
	Projects []domain.Project
	Tasks    []domain.Issue
	// Return is the validated local path to go back to ("" for the agent).
	Return string
	// Runtime is the low-trust runtime checklist (the same one the email
	// wizard shows); the server checks both again when an inbox connects.
	Runtime *trustNotice
	Err     *APIError
}

func (u *UI) trustPage(c *rc) {
	a, ok := c.loadAgent()
	if !ok {
		return
	}
	d := trustData{Agent: a, Preset: a.Permissions.TrustPreset, Kind: "project", Return: c.r.URL.Query().Get("return")}
	if b := a.Permissions.Boundary(); b != nil {
		if b.RootIssueID != "" {
			d.Kind, d.Task = "task", b.RootIssueID
		} else if len(b.ProjectIDs) > 0 {
			d.Project = b.ProjectIDs[0]
		}
	}
	u.renderTrust(c, http.StatusOK, d)
}

func (u *UI) renderTrust(c *rc, status int, d trustData) {
	if !c.caps.Write {
		c.forbidden(c.routeAction(), "")
		return
	}
	if d.Preset == "" {
		d.Preset = domain.TrustStandard
	}
	d.Return = localReturn(d.Return)
	var (
		sett domain.InstanceSettings
		envs []domain.Environment
	)
	parallel(
		func() { _, _ = page(c, c.cl().Projects(c.cid), nil, &d.Projects) },
		func() { _, _ = page(c, c.cl().Issues(c.cid), apiclient.Query("limit", "200"), &d.Tasks) },
		func() { _ = into(c, &sett)(c.cl().Settings(c.ctx())) },
		func() { _ = into(c, &envs)(c.cl().Environments(c.ctx(), c.cid)) },
	)
	d.Runtime = c.trustNoticeFor(d.Agent, sett, envs, "")
	c.render(status, "trust", view{Title: "Trust settings · " + d.Agent.Name, Nav: "agents",
		Crumbs: []crumb{{"Agents", "/c/" + c.cid + "/agents"}, {d.Agent.Name, "/c/" + c.cid + "/agents/" + d.Agent.ID}, {"Trust settings", ""}}, Data: d})
}

func (u *UI) saveTrust(c *rc) {
	a, ok := c.loadAgent()
	if !ok {
		return
	}
	d := trustData{Agent: a, Preset: c.form("preset"), Kind: c.form("kind"), Project: c.form("project"),
		Task: c.form("task"), Return: c.form("return")}
	perms := domain.AgentPermissions{TrustPreset: d.Preset, AuthorizationPolicy: &domain.AuthorizationPolicy{}}
	if d.Preset == domain.TrustLowTrustReview {
		var tb *domain.TrustBoundary
		switch {
		case d.Kind == "task" && d.Task != "":
			tb = &domain.TrustBoundary{RootIssueID: d.Task}
		case d.Kind != "task" && d.Project != "":
			tb = &domain.TrustBoundary{ProjectIDs: []string{d.Project}}
		}
		if tb == nil {
			d.Err = &APIError{Status: http.StatusUnprocessableEntity, Message: msgNeedBoundary}
			u.renderTrust(c, http.StatusUnprocessableEntity, d)
			return
		}
		perms.AuthorizationPolicy.TrustBoundary = tb
	}
	if _, err := c.cl().PatchAgent(c.ctx(), a.ID, apiclient.AgentInput{Permissions: &perms}); err != nil {
		e := c.check(err)
		if e.Status == http.StatusNotFound || e.Status == http.StatusForbidden {
			c.fail(e)
			return
		}
		d.Err = e
		u.renderTrust(c, e.Status, d)
		return
	}
	to := "/c/" + c.cid + "/agents/" + a.ID
	if r := localReturn(d.Return); r != "" {
		to = r
	}
	c.redirect(to, flashTrustSaved)
}

// localReturn is ret when it is a local UI path, else "" (the open-redirect
// guard: an absolute, protocol-relative or otherwise odd URL is dropped).
func localReturn(ret string) string {
	if ret == "" || safeNext(ret) != ret {
		return ""
	}
	return ret
}
