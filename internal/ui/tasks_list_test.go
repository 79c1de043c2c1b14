package ui_test

import (
	"html"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

var (
	taskRowRe  = regexp.MustCompile(`<tr data-task-id="([^"]+)">\s*<td class="mono nowrap">([^<]*)</td>`)
	loadMoreRe = regexp.MustCompile(`<a class="btn btn-small" href="([^"]+)" rel="next">Load more</a>`)
)

// TestTasksListLoadsMoreSortsAndFilters: the Tasks page shows each task's
// short identifier, pages with "Load more" until every task was shown
// exactly once, keeps the filters and the sort in the URL of every page,
// and lists in the API's order for each sort, on both databases.
func TestTasksListLoadsMoreSortsAndFilters(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, dbURL string) {
		e := startLocal(t, dbURL)
		company := testkit.ID(e.api.JSON("POST", "/api/companies", map[string]string{"name": "Acme"}, 201))
		const n = 110 // three pages of 50
		priorities := []string{"critical", "high", "medium", "low"}
		identifier := map[string]string{}
		var done []string
		for i := range n {
			status := "todo"
			if i%2 == 0 {
				status = "done"
			}
			task := e.api.JSON("POST", "/api/companies/"+company+"/issues", map[string]any{"title": "Task " + strconv.Itoa(i),
				"status": status, "priority": priorities[i%4]}, 201)
			id, ident := testkit.ID(task), task["identifier"].(string)
			if !strings.HasPrefix(ident, "ACME-") {
				t.Fatalf("task identifier %q", ident)
			}
			identifier[id] = ident
			if status == "done" {
				done = append(done, id)
			}
		}
		c := "/c/" + company + "/tasks"
		// pages follows Load more from path and returns every row in
		// order, checking each row's identifier and each next link's query.
		pages := func(path string, keep url.Values) []string {
			t.Helper()
			var ids []string
			for range n {
				p := e.get(path)
				if p.status != 200 {
					t.Fatalf("GET %s: %d", path, p.status)
				}
				if later := len(ids) > 0; later != strings.Contains(p.body, "← First page") {
					t.Fatalf("GET %s: a First page link on a later page only, got one: %v", path, !later)
				}
				rows := taskRowRe.FindAllStringSubmatch(p.body, -1)
				if len(rows) > 50 {
					t.Fatalf("GET %s: %d rows on one page", path, len(rows))
				}
				for _, r := range rows {
					if identifier[r[1]] != r[2] {
						t.Fatalf("task %s shows identifier %q, want %q", r[1], r[2], identifier[r[1]])
					}
					ids = append(ids, r[1])
				}
				m := loadMoreRe.FindStringSubmatch(p.body)
				if m == nil {
					return ids
				}
				if len(rows) != 50 {
					t.Fatalf("GET %s: a page of %d rows offers Load more", path, len(rows))
				}
				path = html.UnescapeString(m[1])
				u, err := url.Parse(path)
				if err != nil || u.Path != c || u.Query().Get("cursor") == "" {
					t.Fatalf("Load more %q: %v", path, err)
				}
				for k := range keep {
					if u.Query().Get(k) != keep.Get(k) {
						t.Fatalf("Load more %q drops %s=%s", path, k, keep.Get(k))
					}
				}
			}
			t.Fatal("Load more does not end")
			return nil
		}
		// api returns the API's order of the company's tasks for q.
		api := func(q string) []string {
			var ids []string
			for _, r := range e.api.List("/api/companies/" + company + "/issues?limit=200&" + q) {
				ids = append(ids, testkit.ID(r))
			}
			return ids
		}
		once := func(what string, got, want []string) {
			t.Helper()
			if len(got) != len(want) {
				t.Fatalf("%s: %d rows, want %d", what, len(got), len(want))
			}
			seen := map[string]bool{}
			for _, id := range got {
				if seen[id] {
					t.Fatalf("%s: task %s shown twice", what, id)
				}
				seen[id] = true
			}
			for _, id := range want {
				if !seen[id] {
					t.Fatalf("%s: task %s never shown", what, id)
				}
			}
		}

		all := pages(c, nil)
		once("every task", all, api("sort=updated"))
		if want := api("sort=updated"); !slices.Equal(all, want) {
			t.Errorf("default order differs from the API's most recently updated first")
		}

		byPriority := pages(c+"?sort=priority", url.Values{"sort": {"priority"}})
		if want := api("sort=priority"); !slices.Equal(byPriority, want) {
			t.Errorf("sort=priority: the rows are not in the API's priority order")
		}
		rank := map[string]int{}
		for i, p := range priorities {
			rank[p] = i
		}
		prio := map[string]string{}
		for _, r := range e.api.List("/api/companies/" + company + "/issues?limit=200") {
			prio[testkit.ID(r)] = r["priority"].(string)
		}
		for i := 1; i < len(byPriority); i++ {
			if rank[prio[byPriority[i]]] < rank[prio[byPriority[i-1]]] {
				t.Fatalf("sort=priority: a %s task after a %s one", prio[byPriority[i]], prio[byPriority[i-1]])
			}
		}

		keep := url.Values{"status": {"done"}, "sort": {"created"}}
		filtered := pages(c+"?"+keep.Encode(), keep)
		once("status=done", filtered, done)
		if want := api("status=done&sort=created"); !slices.Equal(filtered, want) {
			t.Errorf("status=done&sort=created: the rows are not in the API's newest-first order")
		}
		if p := e.get(c + "?" + keep.Encode()); !strings.Contains(p.body, `<option value="done" selected>`) ||
			!strings.Contains(p.body, `<option value="created" selected>`) {
			t.Errorf("the filter form does not show the URL's status and sort")
		}
		if p := e.get(c + "?origin=email"); taskRowRe.MatchString(p.body) || !strings.Contains(p.body, "No tasks match these filters.") {
			t.Errorf("origin=email lists tasks no email opened")
		}
	})
}
