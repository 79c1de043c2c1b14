// Package dbtest gives tests fresh, migrated databases of both dialects so
// that every behaviour test runs on SQLite and on PostgreSQL.
//
// PostgreSQL comes from PAPERCLIP_TEST_DATABASE_URL (./scripts/test starts a
// throwaway cluster and sets it). Each test gets its own database, created
// from that server and dropped when the test ends. Without the variable the
// PostgreSQL half is skipped loudly, or fails when CI is set.
package dbtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/paperclipai/paperclipai/internal/db"
)

// EnvURL names the environment variable holding the test PostgreSQL server URL.
const EnvURL = "PAPERCLIP_TEST_DATABASE_URL"

// Each runs fn twice, as subtests "sqlite" and "postgres", each with a fresh
// migrated database.
func Each(t *testing.T, fn func(t *testing.T, d *db.DB)) {
	t.Helper()
	t.Run("sqlite", func(t *testing.T) { fn(t, OpenSQLite(t)) })
	t.Run("postgres", func(t *testing.T) { fn(t, OpenPostgres(t)) })
}

// EachURL runs fn twice with the database URL a server process should use:
// "" (SQLite in its home) and a fresh, empty PostgreSQL database URL.
func EachURL(t *testing.T, fn func(t *testing.T, dialect db.Dialect, databaseURL string)) {
	t.Helper()
	t.Run("sqlite", func(t *testing.T) { fn(t, db.SQLite, "") })
	t.Run("postgres", func(t *testing.T) { fn(t, db.Postgres, PostgresURL(t)) })
}

// OpenSQLite returns a migrated SQLite database in a temporary directory.
func OpenSQLite(t testing.TB) *db.DB {
	t.Helper()
	ctx := context.Background()
	d, err := db.Open(ctx, "", filepath.Join(t.TempDir(), "paperclip.db"))
	if err != nil {
		t.Fatalf("open sqlite: %v", err)
	}
	t.Cleanup(func() { d.Close() })
	if err := d.Migrate(ctx, nil); err != nil {
		t.Fatalf("migrate sqlite: %v", err)
	}
	return d
}

// OpenPostgres returns a migrated database on the test PostgreSQL server.
func OpenPostgres(t testing.TB) *db.DB {
	t.Helper()
	ctx := context.Background()
	d, err := db.Open(ctx, PostgresURL(t), "")
	if err != nil {
		t.Fatalf("open postgres: %v", err)
	}
	t.Cleanup(func() { d.Close() })
	if err := d.Migrate(ctx, nil); err != nil {
		t.Fatalf("migrate postgres: %v", err)
	}
	return d
}

// RequirePostgres skips (or, under CI, fails) the test when no test
// PostgreSQL server is configured, and returns the server URL.
func RequirePostgres(t testing.TB) string {
	t.Helper()
	base := os.Getenv(EnvURL)
	if base == "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is not set: PostgreSQL is required under CI (run ./scripts/test)", EnvURL)
		}
		t.Skipf("SKIPPING POSTGRES HALF: %s is not set; run ./scripts/test to start a throwaway cluster", EnvURL)
	}
	return base
}

// PostgresURL creates a fresh empty database on the test server, drops it
// when the test ends, and returns its URL.
func PostgresURL(t testing.TB) string {
	t.Helper()
	base := RequirePostgres(t)
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "pc_test_" + hex.EncodeToString(b[:])
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("connect to test postgres: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("create test database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, base)
		if err != nil {
			return
		}
		defer c.Close(ctx)
		_, _ = c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("parse %s: %v", EnvURL, err)
	}
	u.Path = "/" + name
	return u.String()
}

// Name returns a short random suffix for test data names.
func Name(prefix string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s-%s", prefix, hex.EncodeToString(b[:]))
}

// EachURLBench is EachURL for benchmarks: fn runs as the sub-benchmarks
// "sqlite" and "postgres" with the database URL a server should use.
func EachURLBench(b *testing.B, fn func(b *testing.B, dialect db.Dialect, databaseURL string)) {
	b.Helper()
	for _, dialect := range []db.Dialect{db.SQLite, db.Postgres} {
		b.Run(string(dialect), func(b *testing.B) {
			url := ""
			if dialect == db.Postgres {
				url = PostgresURL(b)
			}
			fn(b, dialect, url)
		})
	}
}
