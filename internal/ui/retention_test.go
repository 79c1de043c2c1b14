package ui_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
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
		for _, want := range []string{"Space used now", "Run logs", "For ever", `name="emailDays"`} {
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
