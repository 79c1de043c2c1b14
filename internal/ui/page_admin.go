package ui

import (
	"context"
	"github.com/paperclipai/paperclipai/internal/apiclient"
	"net/http"
	"slices"
	"strings"

	"github.com/paperclipai/paperclipai/internal/domain"
)

// Company administration: a member's role, and the company's name and
// deletion (owners). Routes are registered by adminRoutes.

const (
	flashRoleChanged    = "Role changed."
	flashCompanyRenamed = "Company renamed."
	flashCompanyDeleted = "Company deleted."

	msgConfirmCompanyName = "Type the company’s name exactly as shown to delete it."
	msgCompanyNameNeeded  = "Give the company a name."
)

func (u *UI) adminRoutes(m *http.ServeMux) {
	m.HandleFunc("POST /c/{cid}/members/{uid}/role", u.company(u.changeRole))
	m.HandleFunc("GET /c/{cid}/company", u.company(u.companyPage))
	m.HandleFunc("POST /c/{cid}/company", u.company(u.renameCompany))
	m.HandleFunc("POST /c/{cid}/company/delete", u.company(u.deleteCompany))
}

// changeRole changes a member's role, keeping their permissions (owners
// and admins; the API lets only owners touch owners and always keeps one).
func (u *UI) changeRole(c *rc) {
	uid, ok := c.pathUUID("uid")
	if !ok {
		c.notFound()
		return
	}
	var members []domain.Membership
	if e := apiAll(c, "/companies/"+c.cid+"/members", &members); e != nil {
		c.fail(e)
		return
	}
	i := slices.IndexFunc(members, func(m domain.Membership) bool { return m.UserID == uid })
	if i < 0 {
		c.notFound()
		return
	}
	body := apiclient.AddMember{UserID: uid, Role: c.form("role"), Permissions: members[i].Permissions}
	if body.Permissions == nil {
		body.Permissions = []string{}
	}
	c.submit(func(ctx context.Context) error {
		_, err := c.cl().AddMember(ctx, c.cid, body)
		return err
	}, c.caps.Admin, func(e *APIError) {
		u.renderMembers(c, e.Status, membersData{MemberErr: e})
	}, "/c/"+c.cid+"/members", flashRoleChanged)
}

// companyData is the company settings page: the rename form (Name,
// NameErr) and the typed delete confirmation (Confirm, ConfirmErr), each
// error attached to its field; Err is a refusal not about a field.
type companyData struct {
	Name, NameErr       string
	Confirm, ConfirmErr string
	Err                 *APIError
	// Owner: the viewer may rename and delete (owners, instance admins).
	Owner bool
}

func (u *UI) companyPage(c *rc) { u.renderCompany(c, http.StatusOK, companyData{}) }

func (u *UI) renderCompany(c *rc, status int, d companyData) {
	d.Owner = c.caps.Role == domain.RoleOwner || c.caps.InstanceAdmin
	if d.Name == "" && d.NameErr == "" {
		d.Name = c.company.Name
	}
	c.render(status, "company", view{Title: "Company settings", Nav: "members",
		Crumbs: []crumb{{"Members", "/c/" + c.cid + "/members"}, {"Company settings", ""}}, Data: d})
}

func (u *UI) renameCompany(c *rc) {
	d := companyData{Name: strings.TrimSpace(c.form("name"))}
	if d.Name == "" {
		d.NameErr = msgCompanyNameNeeded
		u.renderCompany(c, http.StatusBadRequest, d)
		return
	}
	if e := c.api("PATCH", "/companies/"+c.cid, map[string]string{"name": d.Name}, nil); e != nil {
		if c.refusedUnseen(e, true) {
			return
		}
		if d.NameErr = fieldError(e, "name"); d.NameErr == "" {
			d.Err = e
		}
		u.renderCompany(c, e.Status, d)
		return
	}
	c.redirect("/c/"+c.cid+"/company", flashCompanyRenamed)
}

// deleteCompany deletes the company once its name is typed back; the API
// stops its runs and disconnects its inboxes first.
func (u *UI) deleteCompany(c *rc) {
	d := companyData{Confirm: c.form("confirm")}
	if d.Confirm != c.company.Name {
		d.ConfirmErr = msgConfirmCompanyName
		u.renderCompany(c, http.StatusBadRequest, d)
		return
	}
	if e := c.api("DELETE", "/companies/"+c.cid, map[string]string{"confirmName": d.Confirm}, nil); e != nil {
		if c.refusedUnseen(e, true) {
			return
		}
		d.Err = e
		u.renderCompany(c, e.Status, d)
		return
	}
	c.redirect("/", flashCompanyDeleted)
}
