package server_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/config"
	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/server"
	"github.com/paperclipai/paperclipai/internal/testkit"
	"github.com/paperclipai/paperclipai/internal/vault"
)

func newMasterKey(t *testing.T) string {
	t.Helper()
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(k)
}

// startWith starts a server on cfg with the given master key; the caller
// stops it.
func startWith(t *testing.T, cfg config.Config, key string) (*server.Server, *testkit.SyncBuffer, error) {
	t.Helper()
	cfg.MasterKeyB64 = key
	logs := &testkit.SyncBuffer{}
	srv, err := server.Start(context.Background(), cfg, server.Options{LogOutput: logs, AgentBinary: testkit.Binary(t)})
	return srv, logs, err
}

func stop(t *testing.T, srv *server.Server) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
}

// wantWrongKey requires a refused start that says what to do.
func wantWrongKey(t *testing.T, srv *server.Server, logs *testkit.SyncBuffer, err error) {
	t.Helper()
	if err == nil {
		stop(t, srv)
		t.Fatal("a server with another master key started")
	}
	if !errors.Is(err, vault.ErrWrongMasterKey) {
		t.Fatalf("start error = %v, want ErrWrongMasterKey", err)
	}
	for _, want := range []string{"same master key", "PAPERCLIP_SECRETS_MASTER_KEY", "docs/operations.md"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("start error %q does not mention %q", err, want)
		}
	}
	if !strings.Contains(logs.String(), "refusing to start") {
		t.Errorf("the refusal was not logged: %s", logs)
	}
}

// A server whose master key is not the one the database's secrets were
// sealed with refuses to start: a second replica with its own key on one
// PostgreSQL database, a SQLite home restarted with another key, and a
// database from before the check value existed (checked against its
// secrets) alike.
func TestMasterKeyCheck(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, dialect db.Dialect, url string) {
		keyA, keyB := newMasterKey(t), newMasterKey(t)
		cfgA := testkit.Config(t, url)
		first, _, err := startWith(t, cfgA, keyA)
		if err != nil {
			t.Fatalf("first start: %v", err)
		}
		board := testkit.NewClient(t, first.URL())
		cid := testkit.ID(board.JSON("POST", "/api/companies", map[string]any{"name": "Keys"}, 201))
		board.JSON("POST", "/api/companies/"+cid+"/secrets", map[string]any{"name": "token", "value": "canary-key-check"}, 201)

		second := cfgA
		if dialect == db.Postgres {
			// A replica: its own home on the same database, while the
			// first server runs.
			second = testkit.Config(t, url)
		} else {
			stop(t, first)
		}
		srv, logs, err := startWith(t, second, keyB)
		wantWrongKey(t, srv, logs, err)
		srv, _, err = startWith(t, second, keyA)
		if err != nil {
			t.Fatalf("start with the shared key: %v", err)
		}
		stop(t, srv)
		if dialect == db.Postgres {
			stop(t, first)
		}

		// A database created before the check value existed.
		d, err := db.Open(context.Background(), url, cfgA.SQLitePath())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := d.ExecContext(context.Background(), `DELETE FROM instance_key_check`); err != nil {
			t.Fatal(err)
		}
		d.Close()
		srv, logs, err = startWith(t, cfgA, keyB)
		wantWrongKey(t, srv, logs, err)
		srv, _, err = startWith(t, cfgA, keyA)
		if err != nil {
			t.Fatalf("restart with the right key: %v", err)
		}
		stop(t, srv)
	})
}
