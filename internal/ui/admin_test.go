package ui_test

import (
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// TestCompanyAdminSurfaces: the Members page changes a member's role
// (keeping their permissions) and offers the last owner neither a role
// change nor Remove; board keys show their last use; Company settings
// renames the company and deletes it only with its name typed back, each
// problem attached to its field.
func TestCompanyAdminSurfaces(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, dbURL string) {
		e := startLocal(t, dbURL)
		f := e.seed("Admin")
		c := "/c/" + f.company
		pat := e.api.JSON("POST", "/api/companies/"+f.company+"/members", map[string]any{"email": "pat@example.com", "role": "member",
			"permissions": []string{"tools:manage_connections"}}, 201)["userId"].(string)
		var owner string
		for _, m := range e.api.List("/api/companies/" + f.company + "/members") {
			if m["role"] == "owner" {
				owner = m["userId"].(string)
			}
		}

		p := e.get(c + "/members")
		checkPage(t, c+"/members", p)
		if !strings.Contains(p.body, `id="role-`+pat+`"`) || strings.Contains(p.body, `id="role-`+owner+`"`) ||
			strings.Contains(p.body, `action="`+c+`/members/`+owner+`/remove"`) || !strings.Contains(p.body, "· last owner") {
			t.Fatalf("the last owner is offered a role change or Remove, or another member is not")
		}
		if p := e.post(c+"/members", c+"/members/"+pat+"/role", url.Values{"role": {"admin"}}); p.status != 303 {
			t.Fatalf("change role: %d %s", p.status, p.body)
		}
		for _, m := range e.api.List("/api/companies/" + f.company + "/members") {
			if m["userId"] == pat && (m["role"] != "admin" || !strings.Contains(fmt.Sprint(m["permissions"]), "tools:manage_connections")) {
				t.Fatalf("after the role change: %v", m)
			}
		}
		// The API's refusal comes back on the page: the last owner stays.
		if p := e.post(c+"/members", c+"/members/"+owner+"/role", url.Values{"role": {"viewer"}}); p.status != 409 ||
			!strings.Contains(p.body, "keep an owner") {
			t.Fatalf("demoting the last owner: %d", p.status)
		}

		// Board keys: created and last used.
		key := e.api.JSON("POST", "/api/companies/"+f.company+"/board-keys", map[string]any{"name": "Deploy"}, 201)
		p = e.get(c + "/members")
		if !strings.Contains(p.body, `<th scope="col">Last used</th>`) || !strings.Contains(p.body, "Never") {
			t.Fatalf("the key list lacks Last used / Never")
		}
		e.api.As(key["token"].(string), "").JSON("GET", "/api/companies/"+f.company, nil, 200)
		p = e.get(c + "/members")
		row := p.body[strings.Index(p.body, `data-key-id="`+testkit.ID(key)+`"`):]
		row = row[:strings.Index(row, "</tr>")]
		if !strings.Contains(row, `<td class="key-used"><time`) {
			t.Fatalf("a used key shows no last-use time: %s", row)
		}

		// Rename, with the empty name refused on its field.
		p = e.get(c + "/company")
		checkPage(t, c+"/company", p)
		p = e.post(c+"/company", c+"/company", url.Values{"name": {"  "}})
		if p.status != 400 || !strings.Contains(p.body, `aria-describedby="company-rename-error"`) || !strings.Contains(p.body, "Give the company a name.") {
			t.Fatalf("empty name: %d", p.status)
		}
		if p := e.post(c+"/company", c+"/company", url.Values{"name": {"Renamed Inc"}}); p.status != 303 {
			t.Fatalf("rename: %d %s", p.status, p.body)
		}
		if got := e.api.JSON("GET", "/api/companies/"+f.company, nil, 200)["name"]; got != "Renamed Inc" {
			t.Fatalf("name after rename: %v", got)
		}

		// Delete: a wrong confirmation is refused on its field.
		p = e.post(c+"/company", c+"/company/delete", url.Values{"confirm": {"Admin"}})
		if p.status != 400 || !strings.Contains(p.body, `aria-describedby="company-confirm-error"`) ||
			!strings.Contains(p.body, "Type the company’s name exactly as shown to delete it.") {
			t.Fatalf("wrong confirmation: %d", p.status)
		}
		if st, _ := e.api.Do("GET", "/api/companies/"+f.company, nil); st != 200 {
			t.Fatalf("a refused delete deleted: %d", st)
		}
		p = e.post(c+"/company", c+"/company/delete", url.Values{"confirm": {"Renamed Inc"}})
		if p.status != 303 || p.header.Get("Location") != "/" {
			t.Fatalf("delete: %d %s", p.status, p.header.Get("Location"))
		}
		if st, _ := e.api.Do("GET", "/api/companies/"+f.company, nil); st != 404 {
			t.Fatalf("the deleted company answers %d", st)
		}
		if p := e.get("/"); !strings.Contains(p.body, "Company deleted.") {
			t.Error("no flash after the delete")
		}
	})
}

// TestCompanySettingsAreForOwners: a member sees the company's settings
// page without its forms, and a forged post is refused.
func TestCompanySettingsAreForOwners(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, dbURL string) {
		e, _, cid := startAuth(t, dbURL)
		key, _ := e.boardUser("member@example.com", cid, "member", false)
		if p := e.login(key); p.status != 303 {
			t.Fatalf("login: %d", p.status)
		}
		c := "/c/" + cid
		p := e.get(c + "/company")
		checkPage(t, c+"/company", p)
		if strings.Contains(p.body, `action="`+c+`/company/delete"`) || !strings.Contains(p.body, "Only owners can rename or delete the company.") {
			t.Fatal("a member is offered the delete form")
		}
		if p := e.post(c+"/company", c+"/company/delete", url.Values{"confirm": {"Auth Co"}}); p.status != 403 {
			t.Fatalf("a member's delete: %d", p.status)
		}
		if p := e.post(c+"/company", c+"/company", url.Values{"name": {"Mine"}}); p.status != 403 {
			t.Fatalf("a member's rename: %d", p.status)
		}
	})
}

// TestFormErrorsSitUnderTheirFields: a refused field is marked invalid
// and explained under itself in the product's words (not the API's), and
// the same refusal is not repeated above the form.
func TestFormErrorsSitUnderTheirFields(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, dbURL string) {
		e := startLocal(t, dbURL)
		f := e.seed("Fields")
		c := "/c/" + f.company
		for _, tc := range []struct {
			from, path string
			form       url.Values
			id, want   string
		}{
			{c + "/members", c + "/members", url.Values{"email": {"not an address"}, "role": {"member"}}, "member-email", "Enter an email address, like pat@example.com."},
			{c + "/members", c + "/board-keys", url.Values{"name": {strings.Repeat("k", 201)}}, "key-name", "Make it shorter: at most 200 characters."},
			{c + "/tasks/new", c + "/tasks", url.Values{"title": {"   "}, "status": {"todo"}, "priority": {"medium"}}, "task-title", "Fill this in; it can’t be blank."},
			{c + "/projects", c + "/projects", url.Values{"name": {"two\nlines"}}, "project-name", "Keep it to one line of plain text."},
		} {
			p := e.post(tc.from, tc.path, tc.form)
			if p.status != 400 {
				t.Errorf("%s: status %d", tc.id, p.status)
				continue
			}
			if !strings.Contains(p.body, `aria-invalid="true" aria-describedby="`+tc.id+`-error"`) ||
				!strings.Contains(p.body, `<p class="error-text" id="`+tc.id+`-error">`+tc.want+`</p>`) {
				t.Errorf("%s: the refusal is not under its field in product words", tc.id)
			}
			if strings.Contains(p.body, `<div class="alert alert-error"`) {
				t.Errorf("%s: the field's refusal is repeated above the form", tc.id)
			}
		}
	})
}
