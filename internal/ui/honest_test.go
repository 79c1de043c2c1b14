package ui_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
)

// TestNewTaskWakesItsAssignee: assigning an agent on New task starts it
// (the form said "assign an agent to have it picked up", and nothing
// ran); unticking "Wake the assigned agent" leaves the task waiting.
func TestNewTaskWakesItsAssignee(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, dbURL string) {
		e := startLocal(t, dbURL)
		f := e.seed("Wake")
		c := "/c/" + f.company
		p := e.post(c+"/tasks/new", c+"/tasks", url.Values{"title": {"Assigned"}, "status": {"todo"}, "priority": {"medium"},
			"assignee": {f.agent}, "wake": {"1"}})
		if p.status != 303 {
			t.Fatalf("create: %d %s", p.status, p.body)
		}
		tid := strings.TrimPrefix(p.header.Get("Location"), c+"/tasks/")
		runs := e.api.List("/api/companies/" + f.company + "/heartbeat-runs?issueId=" + tid)
		if len(runs) != 1 || runs[0]["wakeReason"] != "assignment" {
			t.Fatalf("runs of the assigned task: %v", runs)
		}
		if page := e.get(c + "/tasks/" + tid); !strings.Contains(page.body, "Agent woken (run ") {
			t.Errorf("the flash does not say the agent was woken")
		}
		p = e.post(c+"/tasks/new", c+"/tasks", url.Values{"title": {"Waiting"}, "status": {"todo"}, "priority": {"medium"},
			"assignee": {f.agent}})
		tid = strings.TrimPrefix(p.header.Get("Location"), c+"/tasks/")
		if runs := e.api.List("/api/companies/" + f.company + "/heartbeat-runs?issueId=" + tid); len(runs) != 0 {
			t.Fatalf("an unticked wake started %d runs", len(runs))
		}
		if page := e.get(c + "/tasks/new"); !strings.Contains(page.body, `id="task-wake" name="wake" value="1" checked`) {
			t.Error("Wake the assigned agent is not ticked by default")
		}
	})
}
