package api_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/paperclipai/paperclipai/internal/api"
	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// GET /api/me?include=companies: the companies GET /api/companies lists
// for the caller, each with the caller's role, in the same answer; without
// include the answer has no companies field; any other include is a 400.
func TestMeIncludeCompanies(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := newAuthEnv(t, url)
		ctx := context.Background()
		other := testkit.ID(e.ops.JSON("POST", "/api/companies", map[string]any{"name": "Other Inc"}, 201))

		roles := func(me api.Me) map[string]string {
			out := map[string]string{}
			for _, c := range me.Companies {
				if c.Name == "" || c.CreatedAt.IsZero() {
					t.Errorf("company %+v lacks its fields", c)
				}
				out[c.ID] = c.Role
			}
			return out
		}
		carol := testkit.Must(e.carol.API().MeWithCompanies(ctx))(t, "carol's me")
		if got := roles(carol); len(got) != 1 || got[e.company] != "member" {
			t.Errorf("carol's companies = %v, want only %s as member", got, e.company)
		}
		alice := testkit.Must(e.alice.API().MeWithCompanies(ctx))(t, "alice's me")
		if got := roles(alice); len(got) != 1 || got[e.company] != "owner" {
			t.Errorf("alice's companies = %v, want only %s as owner", got, e.company)
		}
		// The instance administrator sees every company, as GET /api/companies lists them.
		ops := testkit.Must(e.ops.API().MeWithCompanies(ctx))(t, "ops' me")
		listed := testkit.Must(e.ops.API().Companies(ctx))(t, "ops' companies")
		var ids []string
		for _, c := range ops.Companies {
			ids = append(ids, c.ID)
		}
		for i, c := range listed {
			if i >= len(ids) || ids[i] != c.ID {
				t.Fatalf("ops' me companies %v, want the listing's order %+v", ids, listed)
			}
		}
		if len(ids) != len(listed) || !slices.Contains(ids, other) {
			t.Errorf("ops' me companies %v, want %d companies including %s", ids, len(listed), other)
		}

		// Without include: no companies field at all.
		if out := e.status(e.carol, "GET", "/api/me", nil, 200, "plain me"); strings.Contains(string(out), `"companies"`) {
			t.Errorf("plain /api/me has companies: %s", out)
		}
		// A user in no company gets an empty list, not a missing one.
		stranger, err := e.inst.Store.EnsureUser(ctx, e.inst.DB, "dave@example.com", "Dave", false)
		if err != nil {
			t.Fatal(err)
		}
		_, token, err := e.inst.Store.CreateBoardKey(ctx, e.inst.DB, stranger.ID, "", "dave")
		if err != nil {
			t.Fatal(err)
		}
		if out := e.status(e.anon.As(token, ""), "GET", "/api/me?include=companies", nil, 200, "stranger"); !strings.Contains(string(out), `"companies":[]`) {
			t.Errorf("a user in no company: %s, want companies: []", out)
		}
		// A key restricted to one company sees that company only.
		_, scoped, err := e.inst.Store.CreateBoardKey(ctx, e.inst.DB, e.ids["ops"], other, "scoped")
		if err != nil {
			t.Fatal(err)
		}
		if got := roles(testkit.Must(e.anon.As(scoped, "").API().MeWithCompanies(ctx))(t, "scoped me")); len(got) != 1 || got[other] != "owner" {
			t.Errorf("a key for %s: companies %v, want that company only", other, got)
		}

		out := e.status(e.carol, "GET", "/api/me?include=everything", nil, http.StatusBadRequest, "unknown include")
		if !strings.Contains(string(out), "include must be companies") {
			t.Errorf("unknown include: %s", out)
		}
	})
}

// The local board owns every company: each comes with the owner role.
func TestMeIncludeCompaniesLocalBoard(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		inst := testkit.Start(t, testkit.Config(t, url))
		c := testkit.NewClient(t, inst.URL()).API()
		ctx := context.Background()
		a := testkit.Must(c.CreateCompany(ctx, "One"))(t, "create")
		b := testkit.Must(c.CreateCompany(ctx, "Two"))(t, "create")
		me := testkit.Must(c.MeWithCompanies(ctx))(t, "me")
		if !me.LocalBoard || len(me.Companies) != 2 {
			t.Fatalf("local board me: %+v", me)
		}
		for _, co := range me.Companies {
			if (co.ID != a.ID && co.ID != b.ID) || co.Role != "owner" {
				t.Errorf("local board company %+v, want One or Two as owner", co)
			}
		}
	})
}
