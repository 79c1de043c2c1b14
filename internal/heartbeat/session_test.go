package heartbeat_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/agentcli"
	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/heartbeat"
	"github.com/paperclipai/paperclipai/internal/store"
)

// TestCLISessionIDNeverBecomesAnOption is the session-id injection end to
// end: a CLI whose output stream names the session
// "--dangerously-skip-permissions" (what an agent can make it print) is
// run twice on a task; the id is not kept, and the next run's arguments
// never carry it. A hostile id already stored (by an older version) is
// not used either.
func TestCLISessionIDNeverBecomesAnOption(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		const hostile = "--dangerously-skip-permissions"
		home, tools := t.TempDir(), t.TempDir()
		cli := filepath.Join(tools, "claude")
		script := `#!/bin/sh
printf 'argv:'; for a in "$@"; do printf ' [%s]' "$a"; done; echo
echo '{"type":"system","subtype":"init","session_id":"` + hostile + `"}'
echo '{"type":"assistant","message":{"content":[]}}'
echo '{"type":"result","subtype":"success","is_error":false,"session_id":"` + hostile + `"}'
`
		if err := os.WriteFile(cli, []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
		st := store.New(d)
		ctx := context.Background()
		if err := st.PutSettings(ctx, d, domain.InstanceSettings{AgentCLI: map[string]domain.AgentCLISettings{
			agentcli.Claude: {Command: cli}}}); err != nil {
			t.Fatal(err)
		}
		e := startEnvAdapters(t, d, "Sessions", heartbeat.Options{WorkspacesDir: filepath.Join(home, "workspaces"), RunsDir: filepath.Join(home, "runs")},
			map[string]heartbeat.Adapter{agentcli.Claude: heartbeat.CLIAdapter{Type: agentcli.Claude, Store: st, KillGrace: time.Second}})
		a := e.agent(t, agentcli.Claude, map[string]any{})
		is := domain.Issue{CompanyID: e.company, Title: "t", AssigneeAgentID: a.ID, Status: domain.IssueTodo}
		if _, err := st.CreateIssue(ctx, d, &is); err != nil {
			t.Fatal(err)
		}
		run := func() (domain.Run, string) {
			t.Helper()
			r, _, err := e.svc.Wakeup(ctx, a.ID, heartbeat.WakeRequest{Reason: "test", IssueID: is.ID})
			if err != nil {
				t.Fatal(err)
			}
			r = e.wait(t, r.ID)
			log, _, _, _ := st.GetRunLog(ctx, d, r.ID)
			return r, log
		}
		for i := range 2 {
			r, log := run()
			if r.Status != domain.RunSucceeded || !strings.Contains(log, "argv:") {
				t.Fatalf("run %d %s %q:\n%s", i, r.Status, r.Error, log)
			}
			if strings.Contains(log, "["+hostile+"]") || strings.Contains(log, "--resume") {
				t.Fatalf("run %d: the session id from the stream reached the arguments:\n%s", i, log)
			}
			if r.SessionID == hostile {
				t.Fatalf("run %d recorded session %q", i, r.SessionID)
			}
			if ts, err := st.GetTaskSession(ctx, d, a.ID, is.ID); err == nil && ts.SessionID == hostile {
				t.Fatalf("run %d kept session %q for the next run", i, ts.SessionID)
			}
		}
		// Stored before ids were checked: still never an option.
		r, log := run()
		workdir := heartbeat.TaskDirectory(filepath.Join(home, "workspaces"), e.company, is.ID, false)
		if err := st.PutTaskSession(ctx, d, store.TaskSession{AgentID: a.ID, IssueID: is.ID, AdapterType: agentcli.Claude,
			SessionID: hostile, Workdir: workdir, RunID: r.ID}); err != nil {
			t.Fatal(err)
		}
		if r, log = run(); r.Status != domain.RunSucceeded || strings.Contains(log, hostile+"]") || strings.Contains(log, "--resume") {
			t.Fatalf("a stored hostile session id was used: %s\n%s", r.Status, log)
		}
	})
}
