package e2e_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// previousVersion returns the commit of the previous version: the newest
// vX.Y.Z tag before HEAD, or, until the first tag exists, the commit
// before schema_meta (migration 00023) was added, the last one whose
// binary knows nothing of upgrades.
func previousVersion(t *testing.T) string {
	t.Helper()
	git := func(args ...string) (string, error) {
		cmd := exec.Command("git", args...)
		cmd.Dir = "../.."
		out, err := cmd.Output()
		return strings.TrimSpace(string(out)), err
	}
	if tag, err := git("describe", "--tags", "--abbrev=0", "--match", "v[0-9]*", "HEAD^"); err == nil && tag != "" {
		return tag
	}
	added, err := git("log", "-1", "--format=%H", "--diff-filter=A", "--", "internal/db/migrations/sqlite/00023_schema_meta.sql")
	if err != nil || added == "" {
		t.Fatalf("find the previous version in git history (a full clone is needed): %v", err)
	}
	return added + "^"
}

// buildPrevious builds the previous version's binary from git (git archive
// into a scratch directory, so the repository is not touched).
func buildPrevious(t *testing.T, rev string) string {
	t.Helper()
	src := t.TempDir()
	archive := exec.Command("sh", "-c", fmt.Sprintf("git archive --format=tar %q | tar -x -C %q", rev, src))
	archive.Dir = "../.."
	if b, err := archive.CombinedOutput(); err != nil {
		t.Fatalf("git archive %s: %v\n%s", rev, err, b)
	}
	out := filepath.Join(t.TempDir(), "paperclipai-previous")
	build := exec.Command("go", "build", "-trimpath", "-o", out, "./cmd/paperclipai")
	build.Dir = src
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the previous version (%s): %v\n%s", rev, err, b)
	}
	return out
}

// TestUpgradeFromPreviousVersion creates data with the previous version's
// binary, upgrades to this one (which migrates) and reads everything back;
// then the previous binary, started again on the upgraded database as an
// older replica of a rolling upgrade would be, still serves the data. On
// PostgreSQL it also runs the rolling upgrade itself (docs/deployment.md,
// "Upgrades"): a replica of this version starts and migrates while the
// previous version keeps serving, and each reads what the other wrote.
func TestUpgradeFromPreviousVersion(t *testing.T) {
	old := buildPrevious(t, previousVersion(t))
	dbtest.EachURL(t, func(t *testing.T, dialect db.Dialect, url string) {
		home := t.TempDir()
		startIn := func(bin, home string) *proc {
			cmd := exec.Command(bin, "run", "--home", home, "--listen", "127.0.0.1:0")
			cmd.Env = append(os.Environ(), "PAPERCLIP_DATABASE_URL="+url, "PAPERCLIP_SHUTDOWN_GRACE=20s")
			p := &proc{child: startChild(t, cmd)}
			p.waitHealthy(t)
			return p
		}
		startWith := func(bin string) *proc { return startIn(bin, home) }
		p := startWith(old)
		c := testkit.NewClient(t, p.url)
		cid := testkit.ID(c.JSON("POST", "/api/companies", map[string]any{"name": "Made before the upgrade"}, 201))
		aid := testkit.ID(c.JSON("POST", "/api/companies/"+cid+"/agents", agentBody("Old agent", "true"), 201))
		iid := testkit.ID(c.JSON("POST", "/api/companies/"+cid+"/issues", map[string]any{"title": "Old task", "assigneeAgentId": aid}, 201))
		c.JSON("POST", "/api/issues/"+iid+"/comments", map[string]any{"body": "written by the previous version"}, 201)
		comments := []string{"written by the previous version"}

		check := func(c *testkit.Client, who string) {
			t.Helper()
			if got := c.JSON("GET", "/api/companies/"+cid, nil, 200); got["name"] != "Made before the upgrade" {
				t.Fatalf("%s: company %v", who, got)
			}
			if got := c.JSON("GET", "/api/agents/"+aid, nil, 200); got["name"] != "Old agent" {
				t.Fatalf("%s: agent %v", who, got)
			}
			if got := c.JSON("GET", "/api/issues/"+iid, nil, 200); got["title"] != "Old task" {
				t.Fatalf("%s: task %v", who, got)
			}
			cs := c.List("/api/issues/" + iid + "/comments")
			if len(cs) != len(comments) {
				t.Fatalf("%s: comments %v, want %q", who, cs, comments)
			}
			for i, want := range comments {
				if cs[i]["body"] != want {
					t.Fatalf("%s: comments %v, want %q", who, cs, comments)
				}
			}
		}
		if dialect == db.Postgres {
			// A rolling upgrade: the previous version keeps serving while
			// a replica of this version starts on the same database and
			// migrates it; the older replica still reads and writes, and
			// the newer one sees what it wrote.
			home2 := t.TempDir()
			key := filepath.Join("instance", "secrets", "master.key")
			b, err := os.ReadFile(filepath.Join(home, key))
			if err != nil {
				t.Fatalf("the previous version's master key: %v", err)
			}
			if err := os.MkdirAll(filepath.Dir(filepath.Join(home2, key)), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(home2, key), b, 0o600); err != nil {
				t.Fatal(err)
			}
			newer := startIn(testkit.Binary(t), home2)
			nc := testkit.NewClient(t, newer.url)
			check(nc, "the newer replica beside the older one")
			c.JSON("POST", "/api/issues/"+iid+"/comments", map[string]any{"body": "written by the older replica after the migration"}, 201)
			comments = append(comments, "written by the older replica after the migration")
			check(c, "the older replica after the newer one migrated")
			check(nc, "the newer replica reading the older one's write")
			if err := newer.stop(t, syscall.SIGTERM); err != nil {
				t.Fatalf("stop the newer replica: %v\n%s", err, newer.report())
			}
		}
		if err := p.stop(t, syscall.SIGTERM); err != nil {
			t.Fatalf("stop the previous version: %v\n%s", err, p.report())
		}
		p = startWith(testkit.Binary(t))
		check(testkit.NewClient(t, p.url), "after the upgrade")
		if err := p.stop(t, syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		code, out := runCmd(t, []string{"PAPERCLIP_DATABASE_URL=" + url}, testkit.Binary(t), "admin", "migrate", "--dry-run", "--home", home)
		if code != 0 || !strings.Contains(out, "no pending migrations") || !strings.Contains(out, "last migrated by paperclipai ") {
			t.Fatalf("admin migrate --dry-run after the upgrade: exit %d\n%s", code, out)
		}

		// The previous binary on the upgraded schema (migrations only add).
		p = startWith(old)
		c = testkit.NewClient(t, p.url)
		check(c, "the previous version on the upgraded database")
		c.JSON("POST", "/api/issues/"+iid+"/comments", map[string]any{"body": "still writing"}, 201)
		if err := p.stop(t, syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
	})
}
