package ui_test

import (
	"html"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

var activityRowRe = regexp.MustCompile(`<tr data-action="([^"]+)">`)

// TestActivityPageFiltersAndExportLinks: the Activity page filters by
// kind, task (its identifier, ACME-1) and date range, and its export links
// download exactly the rows it shows, on both databases.
func TestActivityPageFiltersAndExportLinks(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, dbURL string) {
		e := startLocal(t, dbURL)
		f := e.seed("Audit")
		other := testkit.ID(e.api.JSON("POST", "/api/companies/"+f.company+"/issues", map[string]any{"title": "Other task"}, 201))
		e.api.JSON("PATCH", "/api/issues/"+other, map[string]any{"priority": "high"}, 200)
		e.api.JSON("PATCH", "/api/issues/"+f.task, map[string]any{"priority": "low"}, 200)
		// Wait for the seeded run, so no entry is added while the page and
		// its exports are compared.
		testkit.Eventually(t, 30*time.Second, "the seeded run finished", func() bool {
			return e.api.JSON("GET", "/api/heartbeat-runs/"+f.run, nil, 200)["finishedAt"] != nil
		})
		ident := e.api.JSON("GET", "/api/issues/"+f.task, nil, 200)["identifier"].(string)
		c := "/c/" + f.company + "/activity"
		rows := func(path string) ([]string, string) {
			t.Helper()
			p := e.get(path)
			checkPage(t, path, p)
			var actions []string
			for _, m := range activityRowRe.FindAllStringSubmatch(p.body, -1) {
				actions = append(actions, m[1])
			}
			return actions, p.body
		}

		// One task's entries (those about the task itself): its creation
		// and its update, none of the other task's.
		q := url.Values{"kind": {"issue."}, "task": {ident}}
		actions, body := rows(c + "?" + q.Encode())
		if len(actions) < 2 {
			t.Fatalf("kind=issue. task=%s: %v, want at least the creation and the update", ident, actions)
		}
		for _, a := range actions {
			if !strings.HasPrefix(a, "issue.") {
				t.Errorf("kind=issue. shows %s", a)
			}
		}
		if strings.Contains(body, "/tasks/"+other) || !strings.Contains(body, "/tasks/"+f.task) {
			t.Errorf("task=%s shows another task's entries, or none of its own", ident)
		}
		// The export links carry the same filters and hold the same rows.
		for _, exp := range []struct{ id, format string }{{"export-csv", "csv"}, {"export-jsonl", "jsonl"}} {
			m := regexp.MustCompile(`href="([^"]+)" id="` + exp.id + `"`).FindStringSubmatch(body)
			if m == nil {
				t.Fatalf("no %s link", exp.id)
			}
			link := html.UnescapeString(m[1])
			u, err := url.Parse(link)
			if err != nil || u.Query().Get("action") != "issue." || u.Query().Get("taskId") != ident || u.Query().Get("format") != exp.format {
				t.Fatalf("%s link %q does not carry the page's filters", exp.id, link)
			}
			p := e.get(link)
			if p.status != 200 {
				t.Fatalf("GET %s: %d %s", link, p.status, p.body)
			}
			lines := strings.Split(strings.TrimSpace(p.body), "\n")
			if exp.format == "csv" {
				lines = lines[1:] // the header
			}
			if len(lines) != len(actions) {
				t.Errorf("%s export: %d rows, the page shows %d", exp.format, len(lines), len(actions))
			}
			for _, a := range actions {
				if !strings.Contains(p.body, a) {
					t.Errorf("%s export lacks %s", exp.format, a)
				}
			}
		}

		// Agent runs only.
		actions, _ = rows(c + "?kind=heartbeat.")
		if len(actions) == 0 {
			t.Fatal("kind=heartbeat. shows no run entries")
		}
		for _, a := range actions {
			if !strings.HasPrefix(a, "heartbeat.") {
				t.Errorf("kind=heartbeat. shows %s", a)
			}
		}

		// The date range: everything is from today (or, past midnight,
		// yesterday).
		today := time.Now().UTC().Format("2006-01-02")
		tomorrow := time.Now().UTC().AddDate(0, 0, 1).Format("2006-01-02")
		yesterday := time.Now().UTC().AddDate(0, 0, -1).Format("2006-01-02")
		all, _ := rows(c)
		if got, _ := rows(c + "?since=" + yesterday + "&until=" + today); len(got) != len(all) {
			t.Errorf("since yesterday until today (inclusive): %d entries, want all %d", len(got), len(all))
		}
		if got, _ := rows(c + "?since=" + tomorrow); len(got) != 0 {
			t.Errorf("since tomorrow: %v", got)
		}
		// (Two days back: the date may turn between the entries and here.)
		if got, _ := rows(c + "?until=" + time.Now().UTC().AddDate(0, 0, -2).Format("2006-01-02")); len(got) != 0 {
			t.Errorf("until two days ago: %v", got)
		}
	})
}
