package vault_test

import (
	"context"
	"database/sql"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/store"
	"github.com/paperclipai/paperclipai/internal/vault"
)

func TestMasterKeyFileIsCreatedPrivateAndReused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "secrets", "master.key")
	k1, err := vault.LoadMasterKey(path, "")
	if err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v, want 0600", info.Mode().Perm())
	}
	if dir, _ := os.Stat(filepath.Dir(path)); dir.Mode().Perm() != 0o700 {
		t.Fatalf("key dir mode %v, want 0700", dir.Mode().Perm())
	}
	k2, err := vault.LoadMasterKey(path, "")
	if err != nil || string(k1) != string(k2) {
		t.Fatalf("restart must reuse the key: %v", err)
	}
	env := base64.StdEncoding.EncodeToString(make([]byte, 32))
	k3, err := vault.LoadMasterKey(path, env)
	if err != nil || len(k3) != 32 || string(k3) == string(k1) {
		t.Fatalf("env key must override the file: %v", err)
	}
	if _, err := vault.LoadMasterKey(path, "c2hvcnQ="); err == nil {
		t.Fatal("a short env key must be refused")
	}
}

// Issue 9 item 14: a master key file readable by group or others is
// refused, and the message says how to fix it.
func TestMasterKeyFileModeEnforced(t *testing.T) {
	path := filepath.Join(t.TempDir(), "secrets", "master.key")
	if _, err := vault.LoadMasterKey(path, ""); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []os.FileMode{0o644, 0o640, 0o604, 0o660} {
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		_, err := vault.LoadMasterKey(path, "")
		if !errors.Is(err, vault.ErrKeyFileExposed) || !strings.Contains(err.Error(), "chmod 600 "+path) {
			t.Fatalf("mode %04o: %v", mode, err)
		}
	}
	for _, mode := range []os.FileMode{0o600, 0o400} {
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		if _, err := vault.LoadMasterKey(path, ""); err != nil {
			t.Fatalf("mode %04o: %v", mode, err)
		}
	}
}

func TestSealOpen(t *testing.T) {
	key := make([]byte, 32)
	key[0] = 1
	v, err := vault.New(key, nil)
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := v.Seal([]byte("s3cret"), []byte("aad-1"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(sealed, "s3cret") {
		t.Fatal("plaintext visible in sealed text")
	}
	if got, err := v.Open(sealed, []byte("aad-1")); err != nil || string(got) != "s3cret" {
		t.Fatalf("open: %q %v", got, err)
	}
	if _, err := v.Open(sealed, []byte("aad-2")); !errors.Is(err, vault.ErrCorrupt) {
		t.Fatalf("value moved to another secret must not open: %v", err)
	}
	tampered := sealed[:len(sealed)-2] + "AA"
	if _, err := v.Open(tampered, []byte("aad-1")); !errors.Is(err, vault.ErrCorrupt) {
		t.Fatalf("tampered value must not open: %v", err)
	}
	other, _ := vault.New(make([]byte, 32), nil)
	if _, err := other.Open(sealed, []byte("aad-1")); !errors.Is(err, vault.ErrCorrupt) {
		t.Fatalf("another master key must not open: %v", err)
	}
}

func TestSecretsLifecycle(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		ctx := context.Background()
		st := store.New(d)
		v, _ := vault.New(make([]byte, 32), st)
		var seen []string
		v.OnResolve = func(s string) { seen = append(seen, s) }
		c, _ := st.CreateCompany(ctx, d, "C", "")
		var id string
		err := st.Tx(ctx, func(tx *sql.Tx) error {
			sec, err := v.CreateSecret(ctx, tx, c.ID, "api-key", []byte("value-one"))
			id = sec.ID
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		err = st.Tx(ctx, func(tx *sql.Tx) error {
			_, err := v.CreateSecret(ctx, tx, c.ID, "api-key", []byte("dup"))
			return err
		})
		if !errors.Is(err, store.ErrConflict) {
			t.Fatalf("duplicate name: %v", err)
		}
		if err := st.Tx(ctx, func(tx *sql.Tx) error { _, err := v.RotateSecret(ctx, tx, id, []byte("value-two")); return err }); err != nil {
			t.Fatal(err)
		}
		for ver, want := range map[int]string{0: "value-two", 1: "value-one", 2: "value-two"} {
			got, err := v.Resolve(ctx, d, id, ver)
			if err != nil || string(got) != want {
				t.Fatalf("version %d: %q %v", ver, got, err)
			}
		}
		if len(seen) == 0 {
			t.Fatal("stored and resolved values must be reported for redaction")
		}
		b := domain.SecretBinding{CompanyID: c.ID, SecretID: id, TargetType: "tool_connection", TargetID: "conn-1",
			ConfigPath: "credentials.apiKey", Required: true}
		if err := st.PutBinding(ctx, d, &b); err != nil {
			t.Fatal(err)
		}
		if deleted, err := v.DeleteIfUnreferenced(ctx, d, id); err != nil || deleted {
			t.Fatalf("bound secret must stay: %v %v", deleted, err)
		}
		if _, err := st.DeleteBindings(ctx, d, "tool_connection", "conn-1"); err != nil {
			t.Fatal(err)
		}
		if deleted, err := v.DeleteIfUnreferenced(ctx, d, id); err != nil || !deleted {
			t.Fatalf("unreferenced secret must go: %v %v", deleted, err)
		}
		if _, err := v.Resolve(ctx, d, id, 0); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("deleted secret resolves: %v", err)
		}
	})
}
