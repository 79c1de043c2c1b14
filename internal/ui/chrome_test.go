package ui_test

import (
	"bufio"
	"net/http"
	"strconv"
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
		e, admin, cid := startAuth(t, dbURL)
		other := testkit.ID(e.api.JSON("POST", "/api/companies", map[string]string{"name": "Elsewhere Co"}, 201))
		second := testkit.ID(e.api.JSON("POST", "/api/companies", map[string]string{"name": "Second Co"}, 201))
		member, _ := e.boardUser("member@example.com", cid, "member", false)
		if _, err := e.inst.Store.PutMembership(t.Context(), e.inst.DB, second, memberID(t, e), "viewer", nil); err != nil {
			t.Fatal(err)
		}
		if p := e.login(member); p.status != http.StatusSeeOther {
			t.Fatalf("login: %d %s", p.status, p.body)
		}
		before := apiCalls(t, e.base, admin)

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
		after := apiCalls(t, e.base, admin)
		// The chrome's one identity call, and no separate company or list
		// call, all tagged in-process; the page view adds nothing to the
		// network API traffic.
		for route, want := range map[string]int{"GET /api/me": 1, "GET /api/companies": 0, "GET /api/companies/{companyId}": 0} {
			if got := after[viaInProcess][route] - before[viaInProcess][route]; got != want {
				t.Errorf("one company page made %d in-process %s calls, want %d", got, route, want)
			}
		}
		for route, n := range after[viaHTTP] {
			if n != before[viaHTTP][route] {
				t.Errorf("one company page counted %d network API requests to %s", n-before[viaHTTP][route], route)
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

// The via label values of the API request metrics.
const (
	viaHTTP      = "http"
	viaInProcess = "in_process"
)

// apiCalls reads the server's API request counts from /metrics (which
// needs an instance administrator in this mode, hence adminKey): via label
// to route to count, every status summed.
func apiCalls(t *testing.T, base, adminKey string) map[string]map[string]int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, base+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+adminKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s", resp.Status)
	}
	out := map[string]map[string]int{viaHTTP: {}, viaInProcess: {}}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "paperclip_http_requests_total{") {
			continue
		}
		route, via := label(line, "route"), label(line, "via")
		n, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil || route == "" || out[via] == nil {
			t.Fatalf("unreadable metrics line %q", line)
		}
		out[via][route] += int(n)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// label is the value of the named label in a metrics line ("" if absent).
func label(line, name string) string {
	_, v, ok := strings.Cut(line, name+`="`)
	if !ok {
		return ""
	}
	v, _, _ = strings.Cut(v, `"`)
	return v
}
