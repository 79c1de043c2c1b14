package store

import (
	"crypto/sha256"
	"encoding/hex"
)

// HashToken returns the hex SHA-256 of a bearer token. Only hashes are
// stored, so a database leak does not leak usable tokens.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}
