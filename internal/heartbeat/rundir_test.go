package heartbeat_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/heartbeat"
	"github.com/paperclipai/paperclipai/internal/sandbox"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// TestHostRunHomeAndRunDirectory: a host run's HOME is a fresh 0700
// directory of its own run, not its task directory; the run's directory
// (HOME included, even a part the agent made read-only) is removed once
// the outcome is recorded, and directories a previous process left behind
// are swept when the service starts.
func TestHostRunHomeAndRunDirectory(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		e := newWSEnv(t, d)
		runs := filepath.Join(e.home, "instance", "runs")
		a := e.shAgent(t, "", `echo "home=$HOME"; stat -c 'mode=%a' "$HOME"; ls -A "$HOME"; `+
			`mkdir "$HOME/locked" && touch "$HOME/locked/f" && chmod 500 "$HOME/locked"; echo planted > "$HOME/.profile"`)
		task := e.plainTask(t, a.ID, "")
		for i := range 2 {
			r, log := e.run(t, a.ID, task.ID)
			want := filepath.Join(runs, r.ID, "home")
			if r.Status != domain.RunSucceeded || !strings.HasPrefix(log, "home="+want+"\nmode=700\n") || strings.Contains(log, ".profile") {
				t.Fatalf("run %d %s %q: HOME must be a fresh directory of the run:\n%s", i, r.Status, r.Error, log)
			}
			testkit.Eventually(t, 30*time.Second, "the run's directory removed", func() bool {
				_, err := os.Stat(filepath.Join(runs, r.ID))
				return os.IsNotExist(err)
			})
		}
		if _, err := os.Stat(filepath.Join(heartbeat.TaskDirectory(e.workspaces, e.company, task.ID, false), ".profile")); !os.IsNotExist(err) {
			t.Fatalf("the run's HOME was its task directory: %v", err)
		}

		// A crashed process's run directory (with a run token in its MCP
		// configuration) is swept at the next start.
		left := filepath.Join(runs, testkit.NewUUID())
		if err := os.MkdirAll(filepath.Join(left, "cli"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(left, "cli", "mcp.json"), []byte(`{"Authorization":"Bearer pcr_leftover"}`), 0o600); err != nil {
			t.Fatal(err)
		}
		user, _ := sandbox.HostIdentity()
		startEnv(t, d, "Again", heartbeat.Options{WorkspacesDir: e.workspaces, RunsDir: runs, Home: e.home, SandboxUser: user})
		if _, err := os.Stat(left); !os.IsNotExist(err) {
			t.Fatalf("a leftover run directory survived the start: %v", err)
		}
	})
}
