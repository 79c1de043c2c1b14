package ui_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/paperclipai/paperclipai/internal/config"
	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// TestRetentionPage shows the space used and the settings (kept for ever
// by default), saves new limits through the API, and re-shows the form
// with a clear error for a value that is not a number of days.
func TestRetentionPage(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, dbURL string) {
		e := startLocal(t, dbURL)
		f := e.seed("Keepers")
		path := "/c/" + f.company + "/retention"
		p := e.get(path)
		checkPage(t, path, p)
		// The space each kind of data uses, one row per kind.
		for _, want := range []string{"Space used now", "Email content", "Email attachments", "Run logs",
			"Task directories (this server)", "For ever", `name="emailDays"`} {
			if !strings.Contains(p.body, want) {
				t.Errorf("retention page lacks %q", want)
			}
		}
		if m := e.get("/c/" + f.company + "/members"); !strings.Contains(m.body, `href="`+path+`"`) {
			t.Error("the members page does not link the retention page")
		}
		res := e.post(path, path, url.Values{"emailDays": {"30"}, "runLogDays": {""}, "taskDirDays": {"7"}})
		if res.status != http.StatusSeeOther && res.status != http.StatusFound {
			t.Fatalf("save: %d %s", res.status, res.body)
		}
		got := e.api.JSON("GET", "/api/companies/"+f.company+"/retention", nil, 200)
		if got["emailDays"] != float64(30) || got["runLogDays"] != nil || got["taskDirDays"] != float64(7) {
			t.Fatalf("saved settings = %v", got)
		}
		if p := e.get(path); !strings.Contains(p.body, "30 days") || !strings.Contains(p.body, "7 days after done") {
			t.Errorf("the page does not show the saved limits")
		}
		bad := e.post(path, path, url.Values{"emailDays": {"soon"}})
		if bad.status != http.StatusBadRequest || !strings.Contains(bad.body, "whole numbers") {
			t.Errorf("non-numeric days: %d", bad.status)
		}
		bad = e.post(path, path, url.Values{"emailDays": {"0"}})
		if bad.status != http.StatusBadRequest || !strings.Contains(bad.body, "between 1 and 36500") {
			t.Errorf("0 days: %d", bad.status)
		}
	})
}

// TestRetentionIsForOwners: in authenticated mode an admin (not an owner)
// reads the retention settings but cannot change them; an owner can; a
// viewer of another company sees nothing.
func TestRetentionIsForOwners(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, dbURL string) {
		e := start(t, dbURL, config.ModeAuthenticated)
		rootKey, _ := e.boardUser("root@example.com", "", "", true)
		root := e.api.As(rootKey, "")
		co := testkit.ID(root.JSON("POST", "/api/companies", map[string]string{"name": "Owned"}, 201))
		other := testkit.ID(root.JSON("POST", "/api/companies", map[string]string{"name": "Other"}, 201))
		ownerKey, _ := e.boardUser("owner@example.com", co, "owner", false)
		adminKey, _ := e.boardUser("admin@example.com", co, "admin", false)
		strangerKey, _ := e.boardUser("viewer@example.com", other, "viewer", false)
		path := "/api/companies/" + co + "/retention"
		body := map[string]any{"emailDays": 10, "runLogDays": nil, "taskDirDays": nil}
		e.api.As(adminKey, "").JSON("GET", path, nil, 200)
		e.api.As(adminKey, "").JSON("PUT", path, body, 403)
		if st, _ := e.api.As(strangerKey, "").Do("GET", path, nil); st != 404 && st != 403 {
			t.Fatalf("another company's viewer read the settings: %d", st)
		}
		e.api.As(ownerKey, "").JSON("PUT", path, body, 200)
		e.api.As(ownerKey, "").JSON("PUT", path, map[string]any{"emailDays": 10, "bogus": 1}, 400)
		if got := e.api.As(adminKey, "").JSON("GET", path, nil, 200); got["emailDays"] != float64(10) {
			t.Fatalf("settings = %v", got)
		}
	})
}
