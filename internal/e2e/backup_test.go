package e2e_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/store"
	"github.com/paperclipai/paperclipai/internal/testkit"
	"github.com/paperclipai/paperclipai/internal/vault"
)

// run runs the binary (or another program) and returns its exit code and
// combined output.
func runCmd(t *testing.T, env []string, name string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), string(out)
	}
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return 0, string(out)
}

// copyFile copies src to dst with mode, creating dst's directory 0700.
func copyFile(t *testing.T, src, dst string, mode os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, mode); err != nil {
		t.Fatal(err)
	}
}

// resolveSecret opens a database with a home's master key and reads one
// secret, as the restored server will.
func resolveSecret(t *testing.T, dbURL, sqlitePath, keyFile, secretID string) string {
	t.Helper()
	ctx := context.Background()
	d, err := db.Open(ctx, dbURL, sqlitePath)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	key, err := vault.LoadMasterKey(keyFile, "")
	if err != nil {
		t.Fatal(err)
	}
	v, err := vault.New(key, store.New(d))
	if err != nil {
		t.Fatal(err)
	}
	val, err := v.Resolve(ctx, d, secretID, 0)
	if err != nil {
		t.Fatalf("resolve the secret in the restored database: %v", err)
	}
	return string(val)
}

// The backup and restore procedure of docs/deployment.md: an online
// SQLite copy with `paperclipai admin backup` (pg_dump and pg_restore on
// PostgreSQL) plus the master key restore into a new home whose server
// has exactly the data of the backup moment, secrets and attachment
// content included.
func TestBackupAndRestore(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, dialect db.Dialect, url string) {
		bin := testkit.Binary(t)
		home := t.TempDir()
		p := start(t, home, url)
		c := testkit.NewClient(t, p.url)
		kept := testkit.ID(c.JSON("POST", "/api/companies", map[string]any{"name": "Before the backup"}, 201))
		sec := testkit.ID(c.JSON("POST", "/api/companies/"+kept+"/secrets", map[string]any{"name": "token", "value": "backup-canary-7731"}, 201))
		// An attachment: its content is in the database, so in the backup.
		issue := testkit.ID(c.JSON("POST", "/api/companies/"+kept+"/issues", map[string]any{"title": "with a file"}, 201))
		fileBytes := bytes.Repeat([]byte("backed up bytes\n"), 40000)
		att := uploadTo(t, p.url, issue, "report.txt", "text/plain", fileBytes).ID
		backup := filepath.Join(t.TempDir(), "paperclip-backup")
		env := []string{"PAPERCLIP_DATABASE_URL=" + url}
		restoredURL := ""
		if dialect == db.SQLite {
			// Online: the server keeps running during the copy.
			code, out := runCmd(t, env, bin, "admin", "backup", "--home", home, "--out", backup)
			if code != 0 || !strings.Contains(out, "backed up") || !strings.Contains(out, "master key") {
				t.Fatalf("admin backup: %d %s", code, out)
			}
			if info, err := os.Stat(backup); err != nil || info.Mode().Perm() != 0o600 {
				t.Fatalf("backup file: %v %v", info, err)
			}
			if code, out := runCmd(t, env, bin, "admin", "backup", "--home", home, "--out", backup); code == 0 || !strings.Contains(out, "exists") {
				t.Fatalf("a second backup over the first: %d %s", code, out)
			}
		} else {
			if code, out := runCmd(t, env, bin, "admin", "backup", "--home", home, "--out", backup); code == 0 || !strings.Contains(out, "pg_dump") {
				t.Fatalf("admin backup on PostgreSQL must point to pg_dump: %d %s", code, out)
			}
			if code, out := runCmd(t, nil, "pg_dump", "--format=custom", "--file="+backup, url); code != 0 {
				t.Fatalf("pg_dump: %s", out)
			}
			restoredURL = dbtest.PostgresURL(t)
			if code, out := runCmd(t, nil, "pg_restore", "--no-owner", "--dbname="+restoredURL, backup); code != 0 {
				t.Fatalf("pg_restore: %s", out)
			}
		}
		// Written after the backup: not in the restore.
		c.JSON("POST", "/api/companies", map[string]any{"name": "After the backup"}, 201)
		if err := p.stop(t, syscall.SIGTERM); err != nil {
			t.Fatalf("stop: %v", err)
		}

		restored := t.TempDir()
		restoredDB := filepath.Join(restored, "instance", "db", "paperclip.db")
		if dialect == db.SQLite {
			copyFile(t, backup, restoredDB, 0o600)
		}
		key := filepath.Join(restored, "instance", "secrets", "master.key")
		copyFile(t, filepath.Join(home, "instance", "secrets", "master.key"), key, 0o600)
		if got := resolveSecret(t, restoredURL, restoredDB, key, sec); got != "backup-canary-7731" {
			t.Fatalf("restored secret %q", got)
		}
		p2 := start(t, restored, restoredURL)
		companies := testkit.NewClient(t, p2.url).List("/api/companies")
		if len(companies) != 1 || testkit.ID(companies[0]) != kept {
			t.Fatalf("restored companies: %v", companies)
		}
		// The new home never had the file: it comes from the database.
		if st, body := testkit.NewClient(t, p2.url).Do("GET", "/api/attachments/"+att+"/content", nil); st != 200 || !bytes.Equal(body, fileBytes) {
			t.Fatalf("restored attachment: %d, %d bytes", st, len(body))
		}
	})
}
