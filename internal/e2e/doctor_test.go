package e2e_test

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// tree lists every file under dir with its size, mode and modification
// time, so two listings differ when anything was written.
func tree(t *testing.T, dir string) string {
	t.Helper()
	var lines []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		lines = append(lines, fmt.Sprintf("%s %d %v %d", path, info.Size(), info.Mode(), info.ModTime().UnixNano()))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func doctor(t *testing.T, home, dbURL string) (int, string) {
	t.Helper()
	cmd := exec.Command(testkit.Binary(t), "doctor", "--home", home)
	cmd.Env = append(os.Environ(), "PAPERCLIP_DATABASE_URL="+dbURL)
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, string(out)
}

// `paperclipai doctor` only looks: on a fresh home it creates neither the
// home, the database nor the key (and migrates nothing on PostgreSQL); on
// a used home it changes no file.
func TestDoctorWritesNothing(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, dialect db.Dialect, url string) {
		parent := t.TempDir()
		home := filepath.Join(parent, "fresh")
		code, out := doctor(t, home, url)
		if code != 0 || !strings.Contains(out, "all checks passed") || !strings.Contains(out, "will be created on first start") {
			t.Fatalf("doctor on a fresh home: %d\n%s", code, out)
		}
		if _, err := os.Stat(home); !os.IsNotExist(err) {
			t.Fatalf("doctor created the home: %v\n%s", err, tree(t, parent))
		}
		if dialect == db.Postgres {
			ctx := context.Background()
			conn, err := pgx.Connect(ctx, url)
			if err != nil {
				t.Fatal(err)
			}
			var n int
			err = conn.QueryRow(ctx, `SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'`).Scan(&n)
			conn.Close(ctx)
			if err != nil || n != 0 {
				t.Fatalf("doctor created %d tables (%v)", n, err)
			}
		}
		// A used home: the server ran and stopped; doctor leaves it as it was.
		p := start(t, home, url)
		if err := p.stop(t, syscall.SIGTERM); err != nil {
			t.Fatalf("stop: %v\n%s", err, p.stderr.String())
		}
		before := tree(t, home)
		code, out = doctor(t, home, url)
		if code != 0 || !strings.Contains(out, "all checks passed") {
			t.Fatalf("doctor on a used home: %d\n%s", code, out)
		}
		if dialect == db.SQLite && !strings.Contains(out, "ok    database file (sqlite") {
			t.Fatalf("doctor did not check the database file:\n%s", out)
		}
		if after := tree(t, home); after != before {
			t.Fatalf("doctor changed the home:\nbefore:\n%s\nafter:\n%s", before, after)
		}
		// A file that is not a database is reported, still without writing.
		if dialect == db.SQLite {
			dbFile := filepath.Join(home, "instance", "db", "paperclip.db")
			if err := os.WriteFile(dbFile, []byte("not a database, just text"), 0o600); err != nil {
				t.Fatal(err)
			}
			before = tree(t, home)
			if code, out = doctor(t, home, url); code == 0 || !strings.Contains(out, "not a SQLite database") {
				t.Fatalf("doctor on a damaged database: %d\n%s", code, out)
			}
			if after := tree(t, home); after != before {
				t.Fatal("doctor changed the home while reporting a damaged database")
			}
		}
	})
}
