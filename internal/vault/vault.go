// Package vault encrypts company secrets at rest with AES-256-GCM envelope
// encryption: every value gets its own random data key, which is itself
// sealed with the instance master key kept outside the database. No API
// returns a secret value; only server-side code calls Resolve.
package vault

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/store"
)

// ErrCorrupt is returned when a sealed value cannot be opened: wrong master
// key, tampering, or a value moved to another secret.
var ErrCorrupt = errors.New("vault: sealed value cannot be opened")

// Vault seals and opens secret values and manages company secrets.
type Vault struct {
	aead  cipher.AEAD
	keyID string
	store *store.Store
	// OnResolve, when set, is told every value the vault stores or
	// resolves, so the log redactor can mask it should it reach a log line.
	OnResolve func(value string)
}

// LoadMasterKey returns the 32-byte master key: from envB64 (base64) when
// set, else from path, creating path with a fresh random key (mode 0600,
// directory 0700) when it does not exist. An existing file readable by
// group or others is refused (ErrKeyFileExposed).
func LoadMasterKey(path, envB64 string) ([]byte, error) {
	if envB64 != "" {
		k, err := base64.StdEncoding.DecodeString(strings.TrimSpace(envB64))
		if err != nil || len(k) != 32 {
			return nil, errors.New("vault: PAPERCLIP_SECRETS_MASTER_KEY must be base64 of exactly 32 bytes")
		}
		return k, nil
	}
	data, err := readPrivateFile(path)
	if errors.Is(err, ErrKeyFileExposed) {
		return nil, err
	}
	if err == nil {
		k, derr := base64.StdEncoding.DecodeString(strings.TrimSpace(string(data)))
		if derr != nil || len(k) != 32 {
			return nil, fmt.Errorf("vault: master key file %s is not base64 of 32 bytes", path)
		}
		return k, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("vault: read master key: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("vault: create key directory: %w", err)
	}
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		return nil, fmt.Errorf("vault: generate master key: %w", err)
	}
	// O_EXCL: two processes starting together on one home must not both
	// write a key; the loser reads the winner's.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return LoadMasterKey(path, "")
	}
	if err != nil {
		return nil, fmt.Errorf("vault: create master key: %w", err)
	}
	if _, err := f.WriteString(base64.StdEncoding.EncodeToString(k) + "\n"); err != nil {
		f.Close()
		return nil, fmt.Errorf("vault: write master key: %w", err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("vault: write master key: %w", err)
	}
	return k, nil
}

// ErrKeyFileExposed means the master key file is readable by its group or
// by others; the server refuses to start with it.
var ErrKeyFileExposed = errors.New("vault: master key file is readable by group or others")

// readPrivateFile reads path, refusing a file whose mode grants group or
// other users any access. The mode is checked on the open file, so a
// rename between the check and the read cannot swap in another file.
func readPrivateFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if perm := info.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("%w: %s has mode %04o; anyone who reads it can decrypt every company's secrets. Fix it with: chmod 600 %s",
			ErrKeyFileExposed, path, perm, path)
	}
	return io.ReadAll(f)
}

// New returns a vault over the given 32-byte master key.
func New(master []byte, st *store.Store) (*Vault, error) {
	if len(master) != 32 {
		return nil, errors.New("vault: master key must be 32 bytes")
	}
	aead, err := newAEAD(master)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(master)
	return &Vault{aead: aead, keyID: hex.EncodeToString(sum[:4]), store: st}, nil
}

func newAEAD(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("vault: %w", err)
	}
	return cipher.NewGCM(block)
}

func seal(aead cipher.AEAD, plaintext, aad []byte) []byte {
	nonce := make([]byte, aead.NonceSize())
	_, _ = rand.Read(nonce)
	return aead.Seal(nonce, nonce, plaintext, aad)
}

func open(aead cipher.AEAD, sealed, aad []byte) ([]byte, error) {
	if len(sealed) < aead.NonceSize() {
		return nil, ErrCorrupt
	}
	out, err := aead.Open(nil, sealed[:aead.NonceSize()], sealed[aead.NonceSize():], aad)
	if err != nil {
		return nil, ErrCorrupt
	}
	return out, nil
}

// Seal encrypts plaintext bound to aad (the secret id and version, so a
// sealed value copied onto another row does not open) and returns the
// "v1.<keyID>.<wrapped data key>.<ciphertext>" text stored in the database.
func (v *Vault) Seal(plaintext, aad []byte) (string, error) {
	dek := make([]byte, 32)
	if _, err := rand.Read(dek); err != nil {
		return "", fmt.Errorf("vault: generate data key: %w", err)
	}
	dekAEAD, err := newAEAD(dek)
	if err != nil {
		return "", err
	}
	wrapped := seal(v.aead, dek, aad)
	ct := seal(dekAEAD, plaintext, aad)
	enc := base64.RawStdEncoding
	return "v1." + v.keyID + "." + enc.EncodeToString(wrapped) + "." + enc.EncodeToString(ct), nil
}

// Open decrypts a value produced by Seal with the same aad.
func (v *Vault) Open(sealed string, aad []byte) ([]byte, error) {
	parts := strings.Split(sealed, ".")
	if len(parts) != 4 || parts[0] != "v1" {
		return nil, ErrCorrupt
	}
	if parts[1] != v.keyID {
		return nil, fmt.Errorf("%w: sealed with another master key", ErrCorrupt)
	}
	enc := base64.RawStdEncoding
	wrapped, err1 := enc.DecodeString(parts[2])
	ct, err2 := enc.DecodeString(parts[3])
	if err1 != nil || err2 != nil {
		return nil, ErrCorrupt
	}
	dek, err := open(v.aead, wrapped, aad)
	if err != nil {
		return nil, err
	}
	dekAEAD, err := newAEAD(dek)
	if err != nil {
		return nil, err
	}
	return open(dekAEAD, ct, aad)
}

func aad(secretID string, version int) []byte {
	return []byte(fmt.Sprintf("paperclip-secret:%s:%d", secretID, version))
}

// CreateSecret vaults value as a new company secret inside the caller's
// transaction and returns its metadata.
func (v *Vault) CreateSecret(ctx context.Context, q db.Querier, companyID, name string, value []byte) (domain.Secret, error) {
	sec := domain.Secret{CompanyID: companyID, Name: name}
	// The id is chosen before sealing because it is part of the AAD.
	id := store.NewID()
	sealed, err := v.Seal(value, aad(id, 1))
	if err != nil {
		return sec, err
	}
	if err := v.store.InsertSecretWithID(ctx, q, id, &sec, sealed); err != nil {
		return sec, fmt.Errorf("create secret: %w", err)
	}
	v.observe(value)
	return sec, nil
}

// RotateSecret stores value as the secret's new latest version.
func (v *Vault) RotateSecret(ctx context.Context, tx *sql.Tx, secretID string, value []byte) (int, error) {
	sec, err := v.store.GetSecret(ctx, tx, secretID)
	if err != nil {
		return 0, err
	}
	next := sec.LatestVersion + 1
	sealed, err := v.Seal(value, aad(secretID, next))
	if err != nil {
		return 0, err
	}
	got, err := v.store.AddSecretVersion(ctx, tx, secretID, sealed)
	if err != nil {
		return 0, err
	}
	if got != next {
		return 0, fmt.Errorf("rotate secret: concurrent rotation (version %d, expected %d)", got, next)
	}
	v.observe(value)
	return got, nil
}

// Resolve returns a secret's value (version 0 = latest). Only server-side
// code that hands the value to a provider may call it.
func (v *Vault) Resolve(ctx context.Context, q db.Querier, secretID string, version int) ([]byte, error) {
	sealed, ver, err := v.store.SealedSecretVersion(ctx, q, secretID, version)
	if err != nil {
		return nil, err
	}
	return v.openVersion(secretID, sealed, ver)
}

// openVersion opens one sealed version of a secret and reports the value
// to OnResolve.
func (v *Vault) openVersion(secretID, sealed string, version int) ([]byte, error) {
	out, err := v.Open(sealed, aad(secretID, version))
	if err != nil {
		return nil, err
	}
	v.observe(out)
	return out, nil
}

// ResolveAt opens the latest version of the secret bound at a target's
// config path (store.BoundSealedSecret: one round trip); store.ErrNotFound
// when nothing active is bound there.
func (v *Vault) ResolveAt(ctx context.Context, q db.Querier, targetType, targetID, path string) ([]byte, error) {
	id, sealed, ver, err := v.store.BoundSealedSecret(ctx, q, targetType, targetID, path)
	if err != nil {
		return nil, err
	}
	return v.openVersion(id, sealed, ver)
}

// DeleteIfUnreferenced deletes the secret when no binding references it any
// more, and reports whether it did.
func (v *Vault) DeleteIfUnreferenced(ctx context.Context, q db.Querier, secretID string) (bool, error) {
	n, err := v.store.SecretBindingCount(ctx, q, secretID)
	if err != nil {
		return false, err
	}
	if n > 0 {
		return false, nil
	}
	if err := v.store.DeleteSecret(ctx, q, secretID); err != nil {
		return false, err
	}
	return true, nil
}

func (v *Vault) observe(value []byte) {
	if v.OnResolve != nil {
		v.OnResolve(string(value))
	}
}
