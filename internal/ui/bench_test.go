package ui_test

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"net/http"
	"sort"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// BenchmarkPages renders every main page of a company with 10,000 tasks and
// 1,000 runs and reports the server time per page (one loopback request,
// p50 and p95 over the iterations).
//
//	go test ./internal/ui -run '^$' -bench Pages -benchtime 100x
func BenchmarkPages(b *testing.B) {
	for _, dialect := range []string{"sqlite", "postgres"} {
		b.Run(dialect, func(b *testing.B) {
			url := ""
			if dialect == "postgres" {
				url = dbtest.PostgresURL(b)
			}
			cfg := testkit.Config(b, url)
			cfg.LogLevel = "error"
			inst := testkit.Start(b, cfg)
			paths := seedLarge(b, inst)
			for _, p := range paths {
				b.Run(p.name, func(b *testing.B) {
					var times []time.Duration
					for b.Loop() {
						start := time.Now()
						res, err := http.Get(inst.URL() + p.path)
						if err != nil {
							b.Fatal(err)
						}
						_, _ = io.Copy(io.Discard, res.Body)
						res.Body.Close()
						times = append(times, time.Since(start))
						if res.StatusCode != 200 {
							b.Fatalf("%s: status %d", p.path, res.StatusCode)
						}
					}
					sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
					b.ReportMetric(float64(times[len(times)/2].Microseconds())/1000, "p50-ms")
					b.ReportMetric(float64(times[len(times)*95/100].Microseconds())/1000, "p95-ms")
				})
			}
		})
	}
}

type benchPage struct{ name, path string }

// seedLarge writes 10,000 tasks (50 comments on one), 1,000 finished runs
// and a few agents straight into the store.
func seedLarge(b *testing.B, inst *testkit.Instance) []benchPage {
	b.Helper()
	ctx := context.Background()
	st := inst.Store
	api := testkit.NewClient(b, inst.URL())
	cid := testkit.ID(api.JSON("POST", "/api/companies", map[string]string{"name": "Big Co"}, 201))
	var agents []string
	for i := range 5 {
		agents = append(agents, testkit.ID(api.JSON("POST", "/api/companies/"+cid+"/agents", map[string]any{"name": fmt.Sprintf("Agent %d", i),
			"adapterType": "process", "adapterConfig": map[string]any{"command": "/bin/true"}, "status": "paused"}, 201)))
	}
	statuses := []string{"backlog", "todo", "in_progress", "in_review", "blocked", "done", "cancelled"}
	var first, task, run string
	err := st.Tx(ctx, func(tx *sql.Tx) error {
		for i := range 10000 {
			is := domain.Issue{CompanyID: cid, Title: fmt.Sprintf("Task number %d with a realistic title", i),
				Description: "Some description text.", Status: statuses[i%len(statuses)], AssigneeAgentID: agents[i%len(agents)]}
			if _, err := st.CreateIssue(ctx, tx, &is); err != nil {
				return err
			}
			if first == "" {
				first = is.ID
			}
			task = is.ID
		}
		for i := range 50 {
			c := domain.Comment{CompanyID: cid, IssueID: task, Body: fmt.Sprintf("Comment %d with **bold** text", i), AuthorKind: "user"}
			if err := st.CreateComment(ctx, tx, &c); err != nil {
				return err
			}
		}
		for i := range 1000 {
			issue := first
			if i%20 == 0 {
				issue = task
			}
			r := domain.Run{CompanyID: cid, AgentID: agents[i%len(agents)], IssueID: issue, Status: domain.RunSucceeded,
				WakeSource: "api", WakeReason: "manual"}
			if _, err := st.InsertRun(ctx, tx, &r); err != nil {
				return err
			}
			run = r.ID
		}
		_, err := tx.ExecContext(ctx, `UPDATE heartbeat_runs SET started_at = created_at, finished_at = created_at WHERE company_id = $1`, cid)
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	c := "/c/" + cid
	return []benchPage{
		{"home", "/"}, {"overview", c}, {"tasks", c + "/tasks"}, {"tasks-page-100", c + "/tasks?page=100"},
		{"tasks-filtered", c + "/tasks?status=blocked&assignee=" + agents[0]}, {"task", c + "/tasks/" + task},
		{"task-timeline-fragment", c + "/tasks/" + task + "?fragment=task-timeline"}, {"run", c + "/runs/" + run},
		{"agents", c + "/agents"}, {"agent", c + "/agents/" + agents[0]}, {"projects", c + "/projects"},
		{"activity", c + "/activity"}, {"members", c + "/members"}, {"new-task", c + "/tasks/new"},
	}
}
