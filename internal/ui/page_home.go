package ui

import (
	"net/http"

	"github.com/paperclipai/paperclipai/internal/apiclient"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/store"
)

type homeData struct {
	Companies []domain.Company
	Settings  domain.InstanceSettings
	CanCreate bool
	Name      string
	Err       *APIError
}

func (u *UI) home(c *rc) { u.renderHome(c, http.StatusOK, "", nil) }

func (u *UI) renderHome(c *rc, status int, name string, formErr *APIError) {
	d := homeData{Name: name, Err: formErr, CanCreate: c.actor.KeyCompanyID == ""}
	if e := into(c, &d.Companies)(c.cl().Companies(c.ctx())); e != nil {
		c.fail(e)
		return
	}
	_ = into(c, &d.Settings)(c.cl().Settings(c.ctx()))
	c.render(status, "home", view{Title: "Companies", Bare: true, Nav: "home", Data: d})
}

func (u *UI) createCompany(c *rc) {
	name := c.r.PostFormValue("name")
	co, err := c.cl().CreateCompany(c.ctx(), name)
	if e := c.check(err); e != nil {
		u.renderHome(c, e.Status, name, e)
		return
	}
	c.redirect("/c/"+co.ID, flashCompanyCreated)
}

// goCompany is the company switcher's target (a GET form, so it works
// without JavaScript).
func (u *UI) goCompany(c *rc) {
	id := c.r.URL.Query().Get("company")
	if !store.ValidID(id) {
		c.redirect("/", "")
		return
	}
	c.redirect("/c/"+id, "")
}

type settingsData struct {
	Settings domain.InstanceSettings
	Err      *APIError
}

func (u *UI) settingsPage(c *rc) {
	if !c.Me().User.IsInstanceAdmin || c.actor.KeyCompanyID != "" {
		c.forbidden(c.routeAction(), "")
		return
	}
	var d settingsData
	if e := into(c, &d.Settings)(c.cl().Settings(c.ctx())); e != nil {
		c.fail(e)
		return
	}
	c.render(http.StatusOK, "settings", view{Title: "Instance settings", Bare: true, Nav: "settings", Data: d})
}

func (u *UI) saveSettings(c *rc) {
	chat := c.r.PostFormValue("enableChatConnectors") == "on"
	iso := c.r.PostFormValue("enableIsolatedWorkspaces") == "on"
	_, err := c.cl().PatchSettings(c.ctx(), apiclient.SettingsPatch{Experimental: &apiclient.ExperimentalPatch{EnableChatConnectors: &chat, EnableIsolatedWorkspaces: &iso}})
	if e := c.check(err); e != nil {
		if e.Status == http.StatusForbidden {
			c.fail(e)
			return
		}
		d := settingsData{Err: e}
		d.Settings.Experimental.EnableChatConnectors, d.Settings.Experimental.EnableIsolatedWorkspaces = chat, iso
		c.render(e.Status, "settings", view{Title: "Instance settings", Bare: true, Nav: "settings", Data: d})
		return
	}
	c.redirect("/settings", flashSettingsSaved)
}
