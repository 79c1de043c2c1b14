package ui_test

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/testkit"
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

// TestRunsPage: the company Runs page lists runs like a CI list (status,
// agent, task, reason, duration, and the error of a failed run), filtered
// by status and agent.
func TestRunsPage(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, dbURL string) {
		e := startLocal(t, dbURL)
		f := e.seed("Runs")
		c := "/c/" + f.company
		bad := testkit.ID(e.api.JSON("POST", "/api/companies/"+f.company+"/agents", map[string]any{"name": "Broken bot",
			"adapterType": "process", "adapterConfig": map[string]any{"command": "/bin/sh", "args": []string{"-c", "exit 7"}}}, 201))
		failed := testkit.ID(e.api.JSON("POST", "/api/agents/"+bad+"/wakeup", map[string]string{"reason": "manual", "issueId": f.task}, 202))
		testkit.Eventually(t, 30*time.Second, "both runs finished", func() bool {
			return e.api.JSON("GET", "/api/heartbeat-runs/"+f.run, nil, 200)["finishedAt"] != nil &&
				e.api.JSON("GET", "/api/heartbeat-runs/"+failed, nil, 200)["finishedAt"] != nil
		})
		if r := e.api.JSON("GET", "/api/heartbeat-runs/"+failed, nil, 200); r["error"] != "process exited with code 7" {
			t.Fatalf("the broken run ended %v with error %q", r["status"], r["error"])
		}
		p := e.get(c + "/runs")
		checkPage(t, c+"/runs", p)
		for _, want := range []string{`data-run-id="` + f.run + `" data-status="succeeded"`, `data-run-id="` + failed + `" data-status="failed"`,
			"Runs bot", "Broken bot", "Runs task", "Manual", "process exited with code 7", `aria-current="page">Runs</a>`} {
			if !strings.Contains(p.body, want) {
				t.Errorf("runs page lacks %q", want)
			}
		}
		p = e.get(c + "/runs?status=failed")
		if strings.Contains(p.body, `data-run-id="`+f.run+`"`) || !strings.Contains(p.body, `data-run-id="`+failed+`"`) {
			t.Errorf("status filter: %s", p.body)
		}
		p = e.get(c + "/runs?agent=" + f.agent)
		if !strings.Contains(p.body, `data-run-id="`+f.run+`"`) || strings.Contains(p.body, `data-run-id="`+failed+`"`) {
			t.Errorf("agent filter: %s", p.body)
		}
		if p := e.get(c + "/runs?fragment=run-list"); p.status != 200 || !strings.Contains(p.body, `id="run-list-region"`) {
			t.Errorf("run-list fragment: %d", p.status)
		}
	})
}

// TestMembersAdminSurfaces: the Members page lists the company's board
// keys with a Revoke button and members with a Remove button; both act
// through the API (which keeps the last owner).
func TestMembersAdminSurfaces(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, dbURL string) {
		e := startLocal(t, dbURL)
		f := e.seed("Admin")
		c := "/c/" + f.company
		e.api.JSON("POST", "/api/companies/"+f.company+"/members", map[string]any{"email": "pat@example.com", "role": "member"}, 201)
		if p := e.post(c+"/members", c+"/board-keys", url.Values{"name": {"CI deploy"}}); p.status != 201 {
			t.Fatalf("create key: %d", p.status)
		}
		keys := e.api.List("/api/companies/" + f.company + "/board-keys")
		if len(keys) != 1 {
			t.Fatalf("keys: %v", keys)
		}
		kid := testkit.ID(keys[0])
		p := e.get(c + "/members")
		checkPage(t, c+"/members", p)
		if !strings.Contains(p.body, `data-key-id="`+kid+`"`) || !strings.Contains(p.body, "CI deploy") || !strings.Contains(p.body, ">Revoke</button>") {
			t.Fatalf("members page lacks the key list")
		}
		if p := e.post(c+"/members", c+"/board-keys/"+kid+"/revoke", nil); p.status != 303 {
			t.Fatalf("revoke: %d %s", p.status, p.body)
		}
		if keys := e.api.List("/api/companies/" + f.company + "/board-keys"); len(keys) != 0 {
			t.Fatalf("keys after revoke: %v", keys)
		}
		var pat string
		for _, m := range e.api.List("/api/companies/" + f.company + "/members") {
			if m["email"] == "pat@example.com" {
				pat = m["userId"].(string)
			}
		}
		if p := e.post(c+"/members", c+"/members/"+pat+"/remove", nil); p.status != 303 {
			t.Fatalf("remove: %d %s", p.status, p.body)
		}
		if p := e.get(c + "/members"); strings.Contains(p.body, "pat@example.com") {
			t.Error("the removed member is still listed")
		}
	})
}

// TestActivityReadsAsSentences: the activity log reads "{who} {did what}
// {to what}" with the task linked, and the raw payload behind "Show
// payload".
func TestActivityReadsAsSentences(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, dbURL string) {
		e := startLocal(t, dbURL)
		f := e.seed("Words")
		c := "/c/" + f.company
		p := e.get(c + "/activity")
		checkPage(t, c+"/activity", p)
		for _, want := range []string{`<strong>Local board</strong> commented on`, `<a class="clamp" href="` + c + `/tasks/` + f.task + `">Words task</a>`,
			"<summary>Show payload</summary>"} {
			if !strings.Contains(p.body, want) {
				t.Errorf("activity lacks %q", want)
			}
		}
	})
}
