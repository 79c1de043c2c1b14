package ui

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"time"
)

// The wizard's sealed key handle (docs/ui.md, "Pages"): when a pasted key
// turns out to be scoped to one inbox, the page offers "Use the existing
// inbox instead" without asking for the key again and without rendering
// it. The key travels as AES-256-GCM ciphertext under a key derived from
// the vault master key, bound to the company, the setup request and the
// user, and expires after ten minutes.

const keyHandleTTL = 10 * time.Minute

var errBadHandle = errors.New("invalid or expired key handle")

type handleBody struct {
	Key string `json:"key"`
	Exp int64  `json:"exp"`
}

func (u *UI) handleAEAD() (cipher.AEAD, error) {
	k, err := hkdf.Key(sha256.New, u.d.MasterKey, nil, "paperclip-ui-keyhandle-v1", 32)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(k)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

func handleAAD(companyID, rid, user string) []byte {
	if user == "" {
		user = "local"
	}
	return []byte("keyhandle|" + companyID + "|" + rid + "|" + user)
}

// sealKey returns the handle of key for this company, setup and user.
func (u *UI) sealKey(companyID, rid, user, key string) (string, error) {
	aead, err := u.handleAEAD()
	if err != nil {
		return "", err
	}
	plain, _ := json.Marshal(handleBody{Key: key, Exp: u.now().Add(keyHandleTTL).Unix()})
	nonce := make([]byte, aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", err
	}
	sealed := aead.Seal(nonce, nonce, plain, handleAAD(companyID, rid, user))
	return base64.RawURLEncoding.EncodeToString(sealed), nil
}

// openKey returns the key of a handle made by sealKey with the same
// binding, or errBadHandle.
func (u *UI) openKey(companyID, rid, user, handle string) (string, error) {
	aead, err := u.handleAEAD()
	if err != nil {
		return "", err
	}
	raw, err := base64.RawURLEncoding.DecodeString(handle)
	if err != nil || len(raw) < aead.NonceSize() {
		return "", errBadHandle
	}
	plain, err := aead.Open(nil, raw[:aead.NonceSize()], raw[aead.NonceSize():], handleAAD(companyID, rid, user))
	if err != nil {
		return "", errBadHandle
	}
	var b handleBody
	if json.Unmarshal(plain, &b) != nil || b.Key == "" || u.now().Unix() > b.Exp {
		return "", errBadHandle
	}
	return b.Key, nil
}
