package server_test

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// TestShortTaskIdentifiers numbers tasks per company (ACME-1, ACME-2)
// and takes the identifier wherever the API and the CLI take a task id,
// on both databases.
func TestShortTaskIdentifiers(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, databaseURL string) {
		e := setup(t, databaseURL)
		a := e.company("Acme Corp")
		b := e.company("ACME")
		t1 := e.board.JSON("POST", "/api/companies/"+a+"/issues", map[string]any{"title": "first"}, 201)
		t2 := e.board.JSON("POST", "/api/companies/"+a+"/issues", map[string]any{"title": "second"}, 201)
		tb := e.board.JSON("POST", "/api/companies/"+b+"/issues", map[string]any{"title": "other"}, 201)
		if t1["identifier"] != "ACME-1" || t2["identifier"] != "ACME-2" || tb["identifier"] != "ACME2-1" {
			t.Fatalf("identifiers %v %v %v, want ACME-1 ACME-2 ACME2-1", t1["identifier"], t2["identifier"], tb["identifier"])
		}
		if got := e.board.JSON("GET", "/api/issues/acme-2", nil, 200); got["id"] != testkit.ID(t2) {
			t.Errorf("GET /issues/acme-2: %v", got["id"])
		}
		e.board.JSON("PATCH", "/api/issues/ACME-1", map[string]any{"status": "done"}, 200)
		e.board.JSON("POST", "/api/issues/ACME-1/comments", map[string]any{"body": "by identifier"}, 201)
		if cs := e.board.List("/api/issues/ACME-1/comments"); len(cs) != 1 {
			t.Errorf("comments by identifier: %d", len(cs))
		}
		acts := e.board.List("/api/companies/" + a + "/activity?taskId=ACME-1")
		if len(acts) != 2 { // created, updated (a comment is audited as the comment's)
			t.Errorf("activity?taskId=ACME-1: %d entries", len(acts))
		}
		if st, _ := e.board.Do("GET", "/api/companies/"+a+"/heartbeat-runs?issueId=ACME-2", nil); st != 200 {
			t.Errorf("runs?issueId=ACME-2: %d", st)
		}
		for path, want := range map[string]int{"/api/issues/ZZZ-1": 404, "/api/companies/" + a + "/activity?taskId=ACME2-1": 404,
			"/api/issues/not-an-id": 400} {
			if st, body := e.board.Do("GET", path, nil); st != want {
				t.Errorf("GET %s: %d %s, want %d", path, st, body, want)
			}
		}
		// The email routes of a task, and so the MCP email.readThread
		// operation (which calls them) and `paperclipai email thread`.
		e.board.JSON("PATCH", "/api/instance/settings", map[string]any{"experimental": map[string]any{"enableChatConnectors": true}}, 200)
		for path, want := range map[string]int{"/api/companies/" + a + "/email/tasks/ACME-1": 200,
			"/api/companies/" + a + "/email/tasks/acme-2/deliveries": 200, "/api/companies/" + a + "/email/tasks/ACME-99": 404,
			"/api/companies/" + a + "/email/tasks/ACME2-1": 404} {
			if st, body := e.board.Do("GET", path, nil); st != want {
				t.Errorf("GET %s: %d %s, want %d", path, st, body, want)
			}
		}
		thread := exec.Command(e.bin, "email", "thread", "ACME-1", "--company", a)
		thread.Env = append(os.Environ(), "PAPERCLIP_API_URL="+e.inst.URL()+"/api", "PAPERCLIP_API_KEY=")
		if out, err := thread.CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != "null" {
			t.Errorf("paperclipai email thread ACME-1: %v %q", err, out)
		}
		cmd := exec.Command(e.bin, "api", "GET", "/issues/ACME2-1", "--field", "id")
		cmd.Env = append(os.Environ(), "PAPERCLIP_API_URL="+e.inst.URL()+"/api", "PAPERCLIP_API_KEY=")
		out, err := cmd.Output()
		if err != nil || strings.TrimSpace(string(out)) != testkit.ID(tb) {
			t.Errorf("paperclipai api GET /issues/ACME2-1: %v %q", err, out)
		}
	})
}

// TestTaskIdentifiersInRequestBodies takes a task's identifier in request
// bodies too (a task's parentId, a wakeup's issueId, an agent's trust
// boundary, a send's parentIssueId), resolved in the request's company
// only: another company's identifier is refused, never resolved there, on
// both databases.
func TestTaskIdentifiersInRequestBodies(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, databaseURL string) {
		e := setup(t, databaseURL)
		a := e.company("Acme Corp")
		b := e.company("ACME")
		t1 := testkit.ID(e.board.JSON("POST", "/api/companies/"+a+"/issues", map[string]any{"title": "first"}, 201))
		tb := testkit.ID(e.board.JSON("POST", "/api/companies/"+b+"/issues", map[string]any{"title": "other"}, 201)) // ACME2-1
		child := e.board.JSON("POST", "/api/companies/"+a+"/issues", map[string]any{"title": "child", "parentId": "ACME-1"}, 201)
		if child["parentId"] != t1 {
			t.Fatalf("create with parentId ACME-1: parentId %v, want %s", child["parentId"], t1)
		}
		second := testkit.ID(e.board.JSON("POST", "/api/companies/"+a+"/issues", map[string]any{"title": "second"}, 201))
		if got := e.board.JSON("PATCH", "/api/issues/"+second, map[string]any{"parentId": "acme-1"}, 200); got["parentId"] != t1 {
			t.Fatalf("update with parentId acme-1: parentId %v", got["parentId"])
		}
		agent := testkit.ID(e.board.JSON("POST", "/api/companies/"+a+"/agents", map[string]any{"name": "Worker",
			"adapterType": "process", "adapterConfig": map[string]any{"command": "/bin/true"}}, 201))
		run := e.board.JSON("POST", "/api/agents/"+agent+"/wakeup", map[string]any{"reason": "by identifier", "issueId": "ACME-1"}, 202)
		if run["issueId"] != t1 {
			t.Fatalf("wakeup with issueId ACME-1: run %v", run)
		}
		perms := func(root string) map[string]any {
			return map[string]any{"permissions": map[string]any{"authorizationPolicy": map[string]any{
				"trustBoundary": map[string]any{"rootIssueId": root}}}}
		}
		got := e.board.JSON("PATCH", "/api/agents/"+agent, perms("ACME-1"), 200)
		if !strings.Contains(fmt.Sprint(got["permissions"]), t1) {
			t.Fatalf("trust boundary by identifier: %v", got["permissions"])
		}
		// Another company's identifier (ACME2-1 is company b's) never
		// resolves here, nor does an unknown one.
		e.board.JSON("PATCH", "/api/instance/settings", map[string]any{"experimental": map[string]any{"enableChatConnectors": true}}, 200)
		for _, c := range []struct {
			method, path string
			body         map[string]any
			status       int
			want         string
		}{
			{"POST", "/api/companies/" + a + "/issues", map[string]any{"title": "x", "parentId": "ACME2-1"}, 400, "parentId: task not found in this company"},
			{"POST", "/api/companies/" + a + "/issues", map[string]any{"title": "x", "parentId": "ACME-99"}, 400, "parentId: task not found"},
			{"POST", "/api/companies/" + a + "/issues", map[string]any{"title": "x", "parentId": "ACME_1"}, 400, "invalid parentId: must be a UUID or a task identifier"},
			{"PATCH", "/api/issues/" + second, map[string]any{"parentId": tb}, 400, "parentId: task not found in this company"},
			{"POST", "/api/agents/" + agent + "/wakeup", map[string]any{"reason": "x", "issueId": "ACME2-1"}, 400, "issueId: task not found"},
			{"PATCH", "/api/agents/" + agent, perms("ACME2-1"), 400, "trustBoundary.rootIssueId: task not found"},
			{"POST", "/api/companies/" + a + "/email/send", map[string]any{"endpointId": testkit.NewUUID(), "parentIssueId": "ACME2-1",
				"to": []string{"x@example.com"}, "subject": "s", "text": "t", "idempotencyKey": testkit.NewUUID()}, 404, "Email task not found"},
		} {
			st, body := e.board.Do(c.method, c.path, c.body)
			if st != c.status || !strings.Contains(string(body), c.want) {
				t.Errorf("%s %s %v: %d %s, want %d %q", c.method, c.path, c.body, st, body, c.status, c.want)
			}
		}
		if got := e.board.JSON("GET", "/api/issues/"+tb, nil, 200); got["parentId"] != nil {
			t.Errorf("company b's task was touched: %v", got)
		}
	})
}
