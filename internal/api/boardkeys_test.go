package api_test

import (
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/paperclipai/paperclipai/internal/config"
	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// authEnv is an authenticated-mode server with an instance administrator
// ("ops") owning one company whose owner alice, admin bob and member carol
// each hold a key issued by ops.
type authEnv struct {
	t                      *testing.T
	inst                   *testkit.Instance
	url                    string
	anon                   *testkit.Client
	ops, alice, bob, carol *testkit.Client
	company                string
	ids                    map[string]string // user ids by name
}

func newAuthEnv(t *testing.T, url string) *authEnv {
	t.Helper()
	cfg := testkit.Config(t, url)
	cfg.DeploymentMode = config.ModeAuthenticated
	inst := testkit.Start(t, cfg)
	admin, err := inst.Store.EnsureUser(t.Context(), inst.DB, "ops@example.com", "Ops", true)
	if err != nil {
		t.Fatal(err)
	}
	_, token, err := inst.Store.CreateBoardKey(t.Context(), inst.DB, admin.ID, "", "ops")
	if err != nil {
		t.Fatal(err)
	}
	anon := testkit.NewClient(t, inst.URL())
	e := &authEnv{t: t, inst: inst, url: url, anon: anon, ops: anon.As(token, ""), ids: map[string]string{"ops": admin.ID}}
	e.company = testkit.ID(e.ops.JSON("POST", "/api/companies", map[string]any{"name": "Keys Inc"}, 201))
	for name, role := range map[string]string{"alice": "owner", "bob": "admin", "carol": "member"} {
		m := e.ops.JSON("POST", e.path("/members"), map[string]any{"email": name + "@example.com", "role": role}, 201)
		e.ids[name] = m["userId"].(string)
		// An instance administrator may issue a key for a member (onboarding).
		k := e.ops.JSON("POST", e.path("/board-keys"), map[string]any{"userId": e.ids[name], "name": "onboarding"}, 201)
		c := anon.As(k["token"].(string), "")
		switch name {
		case "alice":
			e.alice = c
		case "bob":
			e.bob = c
		case "carol":
			e.carol = c
		}
	}
	return e
}

func (e *authEnv) path(suffix string) string { return "/api/companies/" + e.company + suffix }

func (e *authEnv) status(c *testkit.Client, method, path string, body any, want int, what string) []byte {
	e.t.Helper()
	st, out := c.Do(method, path, body)
	if st != want {
		e.t.Fatalf("%s: %s %s → %d %s, want %d", what, method, path, st, out, want)
	}
	return out
}

// Issue 9 item 4: a company admin mints keys only for themselves; only an
// instance administrator issues keys for others; owners are changed only
// by owners.
func TestBoardKeyMintingAndOwnerChanges(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := newAuthEnv(t, url)
		for _, target := range []string{"carol", "alice", "ops"} {
			out := e.status(e.bob, "POST", e.path("/board-keys"), map[string]any{"userId": e.ids[target]}, 403, "admin mints for "+target)
			if !strings.Contains(string(out), "instance administrator") {
				t.Fatalf("unclear refusal: %s", out)
			}
		}
		e.status(e.carol, "POST", e.path("/board-keys"), map[string]any{"userId": e.ids["bob"]}, 403, "member mints for admin")
		own := e.bob.JSON("POST", e.path("/board-keys"), map[string]any{"userId": e.ids["bob"], "name": "laptop"}, 201)
		if own["userId"] != e.ids["bob"] || own["companyId"] != e.company {
			t.Fatalf("own key: %v", own)
		}
		e.carol.JSON("POST", e.path("/board-keys"), nil, 201) // no body: for the caller

		// An admin can neither demote nor overwrite an owner, nor promote.
		e.status(e.bob, "POST", e.path("/members"), map[string]any{"userId": e.ids["alice"], "role": "viewer"}, 403, "admin demotes owner")
		e.status(e.bob, "POST", e.path("/members"), map[string]any{"userId": e.ids["alice"], "role": "owner", "permissions": []string{}}, 403, "admin rewrites owner")
		e.status(e.bob, "POST", e.path("/members"), map[string]any{"userId": e.ids["bob"], "role": "owner"}, 403, "admin promotes self")
		e.status(e.bob, "DELETE", e.path("/members/"+e.ids["alice"]), nil, 403, "admin removes owner")
		e.bob.JSON("POST", e.path("/members"), map[string]any{"userId": e.ids["carol"], "role": "viewer"}, 201)

		// The last owner is neither demoted nor removed, by anyone.
		e.alice.JSON("POST", e.path("/members"), map[string]any{"userId": e.ids["ops"], "role": "member"}, 201)
		for who, c := range map[string]*testkit.Client{"alice herself": e.alice, "the instance admin": e.ops} {
			out := e.status(c, "POST", e.path("/members"), map[string]any{"userId": e.ids["alice"], "role": "admin"}, 409, who+" demotes the last owner")
			if !strings.Contains(string(out), "keep an owner") {
				t.Fatalf("unclear last-owner refusal: %s", out)
			}
			e.status(c, "DELETE", e.path("/members/"+e.ids["alice"]), nil, 409, who+" removes the last owner")
		}
		e.alice.JSON("POST", e.path("/members"), map[string]any{"userId": e.ids["bob"], "role": "owner"}, 201)
		e.status(e.alice, "DELETE", e.path("/members/"+e.ids["alice"]), nil, 204, "owner leaves while another owner stays")
		e.status(e.alice, "GET", e.path(""), nil, 401, "a removed member's scoped key")

		// Removing a member revokes their keys in the company at once.
		e.status(e.bob, "DELETE", e.path("/members/"+e.ids["carol"]), nil, 204, "owner removes member")
		e.status(e.carol, "GET", e.path(""), nil, 401, "removed member's key")
	})
}

// Two owners demoting each other at once: exactly one wins, the company
// keeps an owner.
func TestConcurrentOwnerDemotions(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := newAuthEnv(t, url)
		e.ops.JSON("POST", e.path("/members"), map[string]any{"userId": e.ids["bob"], "role": "owner"}, 201)
		e.alice.JSON("POST", e.path("/members"), map[string]any{"userId": e.ids["ops"], "role": "member"}, 201)
		var wg sync.WaitGroup
		sts := make([]int, 2)
		for i, pair := range [][2]any{{e.alice, "bob"}, {e.bob, "alice"}} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sts[i], _ = pair[0].(*testkit.Client).Do("POST", e.path("/members"), map[string]any{"userId": e.ids[pair[1].(string)], "role": "member"})
			}()
		}
		wg.Wait()
		owners := 0
		for _, m := range e.ops.List(e.path("/members")) {
			if m["role"] == "owner" {
				owners++
			}
		}
		if owners != 1 || !((sts[0] == 201) != (sts[1] == 201)) {
			t.Fatalf("statuses %v, owners left %d", sts, owners)
		}
	})
}

// Board keys are listed (no tokens) and revoked with DELETE
// /api/board-keys/:id; a revoked key stops working at once.
func TestBoardKeyListAndRevoke(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := newAuthEnv(t, url)
		all := e.alice.List(e.path("/board-keys"))
		if len(all) != 3 {
			t.Fatalf("owner sees the company's keys: %v", all)
		}
		for _, k := range all {
			if _, ok := k["token"]; ok {
				t.Fatalf("a listing shows a token: %v", k)
			}
		}
		mine := e.carol.List(e.path("/board-keys"))
		if len(mine) != 1 || mine[0]["userId"] != e.ids["carol"] {
			t.Fatalf("a member sees only their own keys: %v", mine)
		}
		if n := len(e.ops.List("/api/board-keys")); n != 4 {
			t.Fatalf("instance admin sees every key: %d", n)
		}
		if own := e.bob.List("/api/board-keys"); len(own) != 1 {
			t.Fatalf("GET /api/board-keys: own keys only: %v", own)
		}
		keyOf := func(user string) string {
			for _, k := range all {
				if k["userId"] == e.ids[user] {
					return k["id"].(string)
				}
			}
			t.Fatalf("no key of %s", user)
			return ""
		}
		e.status(e.carol, "DELETE", "/api/board-keys/"+keyOf("bob"), nil, 403, "member revokes admin's key")
		e.status(e.bob, "DELETE", "/api/board-keys/"+keyOf("alice"), nil, 403, "admin revokes owner's key")
		e.status(e.bob, "DELETE", "/api/board-keys/"+testkit.NewUUID(), nil, 404, "unknown key")

		// Another company's owner cannot see this company's keys.
		other := testkit.ID(e.ops.JSON("POST", "/api/companies", map[string]any{"name": "Other"}, 201))
		m := e.ops.JSON("POST", "/api/companies/"+other+"/members", map[string]any{"email": "dan@example.com", "role": "owner"}, 201)
		dan := e.anon.As(e.ops.JSON("POST", "/api/companies/"+other+"/board-keys", map[string]any{"userId": m["userId"]}, 201)["token"].(string), "")
		e.status(dan, "DELETE", "/api/board-keys/"+keyOf("carol"), nil, 404, "foreign owner revokes")

		e.bob.JSON("GET", e.path(""), nil, 200)
		e.status(e.alice, "DELETE", "/api/board-keys/"+keyOf("bob"), nil, 204, "owner revokes admin's key")
		e.status(e.bob, "GET", e.path(""), nil, 401, "revoked key, next request")
		e.status(e.carol, "DELETE", "/api/board-keys/"+keyOf("carol"), nil, 204, "user revokes own key")
		e.status(e.carol, "GET", e.path(""), nil, 401, "self-revoked key")
		if n := len(e.alice.List(e.path("/board-keys"))); n != 1 {
			t.Fatalf("revoked keys leave the listing: %d", n)
		}
	})
}

// `paperclipai admin create-key --company --role` issues a scoped key for
// a member, never an instance administrator.
func TestAdminCreateKeyForMember(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := newAuthEnv(t, url)
		args := []string{"admin", "create-key", "--home", e.inst.Home, "--email", "vic@example.com", "--company", e.company, "--role", "viewer"}
		if url != "" {
			args = append(args, "--database-url", url)
		}
		out, err := exec.Command(testkit.Binary(t), args...).Output()
		token := strings.TrimSpace(string(out))
		if err != nil || !strings.HasPrefix(token, "pcb_") {
			t.Fatalf("create-key --company: %v %q", err, out)
		}
		vic := e.anon.As(token, "")
		vic.JSON("GET", e.path(""), nil, 200)
		e.status(vic, "POST", e.path("/issues"), map[string]any{"title": "x"}, 403, "viewer writes")
		e.status(vic, "PATCH", "/api/instance/settings", map[string]any{}, 403, "member key is no instance admin")
		if cs := vic.List("/api/companies"); len(cs) != 1 {
			t.Fatalf("scoped key sees %d companies", len(cs))
		}
		// The last owner cannot be demoted from the host either.
		args = []string{"admin", "create-key", "--home", e.inst.Home, "--email", "alice@example.com", "--company", e.company, "--role", "member"}
		if url != "" {
			args = append(args, "--database-url", url)
		}
		e.alice.JSON("POST", e.path("/members"), map[string]any{"userId": e.ids["ops"], "role": "member"}, 201)
		if out, err := exec.Command(testkit.Binary(t), args...).CombinedOutput(); err == nil || !strings.Contains(string(out), "keep an owner") {
			t.Fatalf("CLI demoted the last owner: %v %s", err, out)
		}
	})
}
