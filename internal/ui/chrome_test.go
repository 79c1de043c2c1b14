package ui_test

import (
	"bufio"
	"net/http"
	"strings"
	"testing"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// A company page's chrome (who is signed in, the company, the company
// switcher) comes from one GET /api/me?include=companies: the page makes
// no call of its own for the company or the list, and a company outside
// the list is still refused by the API (the 404 page).
func TestPageChromeOneCall(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, dbURL string) {
		e, _, cid := startAuth(t, dbURL)
		other := testkit.ID(e.api.JSON("POST", "/api/companies", map[string]string{"name": "Elsewhere Co"}, 201))
		second := testkit.ID(e.api.JSON("POST", "/api/companies", map[string]string{"name": "Second Co"}, 201))
		member, _ := e.boardUser("member@example.com", cid, "member", false)
		if _, err := e.inst.Store.PutMembership(t.Context(), e.inst.DB, second, memberID(t, e), "viewer", nil); err != nil {
			t.Fatal(err)
		}
		if p := e.login(member); p.status != http.StatusSeeOther {
			t.Fatalf("login: %d %s", p.status, p.body)
		}
		before := inProcess(t, e.base)

		p := e.get("/c/" + cid)
		if p.status != http.StatusOK {
			t.Fatalf("company page: %d %s", p.status, p.body)
		}
		for _, name := range []string{"Auth Co", "Second Co"} {
			if !strings.Contains(p.body, name) {
				t.Errorf("the company switcher lacks %s", name)
			}
		}
		if strings.Contains(p.body, "Elsewhere Co") {
			t.Error("the company switcher lists a company the member is not in")
		}
		after := inProcess(t, e.base)
		for route, want := range map[string]int{"GET /api/companies": 0, "GET /api/companies/{companyId}": 0} {
			if got := after[route] - before[route]; got != want {
				t.Errorf("one company page made %d in-process %s calls, want %d", got, route, want)
			}
		}

		if p := e.get("/c/" + other); p.status != http.StatusNotFound {
			t.Errorf("another company's page: %d, want the 404 page", p.status)
		}
	})
}

// memberID is the id of member@example.com.
func memberID(t *testing.T, e *env) string {
	t.Helper()
	u, err := e.inst.Store.GetUserByEmail(t.Context(), e.inst.DB, "member@example.com")
	if err != nil {
		t.Fatal(err)
	}
	return u.ID
}

// inProcess reads the server's in-process request counts by route from
// /metrics (every status summed).
func inProcess(t *testing.T, base string) map[string]int {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]int{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "paperclip_http_requests_total{") || !strings.Contains(line, `via="in_process"`) {
			continue
		}
		i := strings.Index(line, `route="`)
		j := strings.LastIndexByte(line, ' ')
		if i < 0 || j < 0 {
			continue
		}
		route := line[i+len(`route="`):]
		route = route[:strings.IndexByte(route, '"')]
		var n int
		for _, c := range line[j+1:] {
			if c < '0' || c > '9' {
				break
			}
			n = n*10 + int(c-'0')
		}
		out[route] += n
	}
	return out
}
