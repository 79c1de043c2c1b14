package vault

import (
	"context"
	"errors"
	"fmt"

	"github.com/paperclipai/paperclipai/internal/store"
)

// ErrWrongMasterKey means this server's master key is not the key the
// database's secrets were sealed with: every replica on one database must
// use the same key.
var ErrWrongMasterKey = errors.New("vault: the master key does not match this database")

// keyCheckPlaintext is the known plaintext of the check value, and
// keyCheckAAD binds it to its purpose (no secret's AAD looks like it).
var (
	keyCheckPlaintext = []byte("paperclip master key check v1")
	keyCheckAAD       = []byte("paperclip-instance-key-check")
)

// KeyID returns the fingerprint of the vault's master key (the first four
// bytes of its SHA-256, in hex): safe to log, and equal on every replica
// that shares the key.
func (v *Vault) KeyID() string { return v.keyID }

// CheckMasterKey verifies that this vault's master key is the instance's
// (docs/operations.md, "Replicas and the master key"). The first server to
// start on a database seals a known plaintext with its key; every later
// start must open it, or it fails with ErrWrongMasterKey and a message
// saying how to fix it. A database that already holds secrets but no check
// value (created by an older version) is first checked against one of its
// secrets, so a replica with a wrong key cannot plant its own check value.
func (v *Vault) CheckMasterKey(ctx context.Context) error {
	q := v.store.DB
	for range 2 {
		k, err := v.store.GetKeyCheck(ctx, q)
		if err == nil {
			if _, oerr := v.Open(k.Sealed, keyCheckAAD); oerr != nil {
				return v.wrongKey(k.KeyID)
			}
			return nil
		}
		if !errors.Is(err, store.ErrNotFound) {
			return err
		}
		if id, ver, err := v.store.AnySecretVersion(ctx, q); err == nil {
			if _, err := v.Resolve(ctx, q, id, ver); errors.Is(err, ErrCorrupt) {
				return v.wrongKey("")
			} else if err != nil && !errors.Is(err, store.ErrNotFound) {
				return fmt.Errorf("vault: check master key: %w", err)
			}
		} else if !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("vault: check master key: %w", err)
		}
		sealed, err := v.Seal(keyCheckPlaintext, keyCheckAAD)
		if err != nil {
			return err
		}
		created, err := v.store.InsertKeyCheck(ctx, q, store.KeyCheck{KeyID: v.keyID, Sealed: sealed})
		if err != nil {
			return err
		}
		if created {
			return nil
		}
		// Another replica stored its check value first: verify against it.
	}
	return errors.New("vault: check master key: the check value vanished while it was being read")
}

func (v *Vault) wrongKey(stored string) error {
	was := ""
	if stored != "" {
		was = fmt.Sprintf(" (sealed with master key %s)", stored)
	}
	return fmt.Errorf("%w: this server's master key %s cannot open the secrets stored in the database%s. "+
		"Every server on one database must use the same master key: give each replica the same "+
		"PAPERCLIP_SECRETS_MASTER_KEY, or copy the first server's master key file (PAPERCLIP_SECRETS_MASTER_KEY_FILE, "+
		"default <home>/instance/secrets/master.key) to every replica; see docs/operations.md, \"Replicas and the master key\"",
		ErrWrongMasterKey, v.keyID, was)
}
