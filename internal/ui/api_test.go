package ui_test

import (
	"fmt"
	"testing"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// The API additions the UI relies on: /api/me, issue counts, list paging and
// a wake's comment id.
func TestUIAPIAdditions(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, dbURL string) {
		e := startLocal(t, dbURL)
		f := e.seed("Api")
		me := e.api.JSON("GET", "/api/me", nil, 200)
		if me["localBoard"] != true || me["user"].(map[string]any)["isInstanceAdmin"] != true {
			t.Errorf("local board /me: %v", me)
		}
		viewer, _ := e.boardUser("v@example.com", f.company, "viewer", false)
		vm := e.api.As(viewer, "").JSON("GET", "/api/me", nil, 200)
		ms := vm["memberships"].([]any)
		if vm["localBoard"] != false || len(ms) != 1 || ms[0].(map[string]any)["role"] != "viewer" ||
			ms[0].(map[string]any)["canManageConnections"] != false {
			t.Errorf("viewer /me: %v", vm)
		}

		for i := 0; i < 4; i++ {
			e.api.JSON("POST", "/api/companies/"+f.company+"/issues", map[string]any{"title": fmt.Sprintf("t%d", i), "status": "blocked"}, 201)
		}
		counts := e.api.JSON("GET", "/api/companies/"+f.company+"/issue-counts", nil, 200)
		by := counts["byStatus"].(map[string]any)
		if counts["total"] != 5.0 || by["blocked"] != 4.0 || by["todo"] != 1.0 {
			t.Errorf("counts: %v", counts)
		}
		_, _, h := e.api.DoHeader("GET", "/api/companies/"+f.company+"/issues?limit=2", nil)
		page1 := e.api.List("/api/companies/" + f.company + "/issues?limit=2")
		page2 := e.api.List("/api/companies/" + f.company + "/issues?limit=2&cursor=" + h.Get("X-Next-Cursor"))
		if len(page1) != 2 || len(page2) != 2 || page1[1]["id"] == page2[0]["id"] || page1[0]["id"] == page2[0]["id"] {
			t.Errorf("paging: %v / %v", page1, page2)
		}
		for _, bad := range []string{"limit=0", "limit=201", "offset=2", "limit=x", "cursor=x"} {
			if st, _ := e.api.Do("GET", "/api/companies/"+f.company+"/issues?"+bad, nil); st != 400 {
				t.Errorf("%s: status %d", bad, st)
			}
		}
		if runs := e.api.List("/api/companies/" + f.company + "/heartbeat-runs?limit=1"); len(runs) != 1 {
			t.Errorf("runs limit: %d", len(runs))
		}

		cm := testkit.ID(e.api.JSON("POST", "/api/issues/"+f.task+"/comments", map[string]string{"body": "look"}, 201))
		run := e.api.JSON("POST", "/api/agents/"+f.agent+"/wakeup", map[string]string{"reason": "comment", "issueId": f.task,
			"commentId": cm, "idempotencyKey": "ui-comment:" + cm}, 202)
		if run["wakeCommentId"] != cm {
			t.Errorf("wake comment id: %v", run)
		}
		other := testkit.ID(e.api.JSON("POST", "/api/companies/"+f.company+"/issues", map[string]string{"title": "other"}, 201))
		for _, body := range []map[string]string{
			{"reason": "comment", "issueId": other, "commentId": cm},
			{"reason": "comment", "commentId": cm},
			{"reason": "comment", "issueId": f.task, "commentId": "nope"},
		} {
			if st, out := e.api.Do("POST", "/api/agents/"+f.agent+"/wakeup", body); st != 400 {
				t.Errorf("wake %v: %d %s", body, st, out)
			}
		}
	})
}
