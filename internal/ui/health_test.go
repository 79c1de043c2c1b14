package ui_test

import (
	"net/http"
	"net/http/cookiejar"
	"strings"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// The overview and the agent page show an inbox's health with its reason,
// and a task's failed run shows its error.
func TestInboxHealthOnPages(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, dbURL string) {
		em := testkit.NewEmailEnv(t, dbURL)
		jar, _ := cookiejar.New(nil)
		e := &env{t: t, inst: em.Instance, base: em.URL(), api: em.Board,
			http: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
		ep := testkit.ID(em.Setup("pages", nil))
		em.Control(t, ep, "pause")
		c := "/c/" + em.CompanyID
		if p := e.get(c); !strings.Contains(p.body, `pages@agentmail.to · Mail Agent</a> <span class="muted attention-reason">Paused: no mail is received`) {
			t.Fatalf("overview lacks the paused inbox's reason: %s", p.body)
		}
		if p := e.get(c + "/agents/" + em.AgentID); !strings.Contains(p.body, `data-health="paused"`) ||
			!strings.Contains(p.body, "Paused: no mail is received and nothing is sent") {
			t.Fatalf("agent page lacks the inbox's health: %s", p.body)
		}

		failing := testkit.ID(em.Board.JSON("POST", "/api/companies/"+em.CompanyID+"/agents", map[string]any{"name": "Failing",
			"adapterType": "process", "adapterConfig": map[string]any{"command": "/bin/false"}}, 201))
		task := testkit.ID(em.Board.JSON("POST", "/api/companies/"+em.CompanyID+"/issues", map[string]any{"title": "Doomed",
			"assigneeAgentId": failing}, 201))
		run := testkit.ID(em.Board.JSON("POST", "/api/agents/"+failing+"/wakeup", map[string]string{"reason": "manual", "issueId": task}, 202))
		testkit.Eventually(t, 30*time.Second, "the run to fail", func() bool {
			return em.Board.JSON("GET", "/api/heartbeat-runs/"+run, nil, 200)["status"] == "failed"
		})
		if p := e.get(c + "/tasks/" + task); !strings.Contains(p.body, `<span class="run-error">process exited with code 1</span>`) {
			t.Fatalf("task page lacks the failed run's error: %s", p.body)
		}
	})
}
