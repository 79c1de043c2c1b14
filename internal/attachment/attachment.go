// Package attachment stores task attachments by content and holds the one
// set of rules for their names and media types. A file lives once per
// sha256 under Dir, written once through a temporary file and a rename, and
// is read back by digest. Uploads through the API, mail imported by the
// inbound pipeline and attachments sent by the outbound worker all use it.
package attachment

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"mime"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// ErrTooLarge means the content exceeds the store's MaxBytes.
var ErrTooLarge = errors.New("attachment too large")

// Store is the content-addressed attachment store.
type Store struct {
	// Dir is the store's root directory (created on first write).
	Dir string
	// MaxBytes bounds one attachment.
	MaxBytes int64
	// Allowed lists the accepted media types, compared without parameters.
	Allowed []string
}

// Path is where content with the given sha256 lives on disk.
func (s Store) Path(sha string) string { return filepath.Join(s.Dir, sha[:2], sha) }

// Open opens the content with the given sha256.
func (s Store) Open(sha string) (*os.File, error) {
	if len(sha) < 2 {
		return nil, fmt.Errorf("open attachment: invalid digest")
	}
	f, err := os.Open(s.Path(sha))
	if err != nil {
		return nil, fmt.Errorf("open attachment: %w", err)
	}
	return f, nil
}

// Put streams r into the store and returns its sha256 and size. Content
// over MaxBytes is ErrTooLarge (nothing is kept); identical content is
// stored once.
func (s Store) Put(r io.Reader) (sha string, size int64, err error) {
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return "", 0, fmt.Errorf("store attachment: %w", err)
	}
	tmp, err := os.CreateTemp(s.Dir, ".upload-*")
	if err != nil {
		return "", 0, fmt.Errorf("store attachment: %w", err)
	}
	defer os.Remove(tmp.Name())
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, h), io.LimitReader(r, s.MaxBytes+1))
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", 0, fmt.Errorf("store attachment: %w", err)
	}
	if n > s.MaxBytes {
		return "", n, ErrTooLarge
	}
	sha = hex.EncodeToString(h.Sum(nil))
	final := s.Path(sha)
	if err := os.MkdirAll(filepath.Dir(final), 0o700); err != nil {
		return "", 0, fmt.Errorf("store attachment: %w", err)
	}
	if err := os.Rename(tmp.Name(), final); err != nil {
		return "", 0, fmt.Errorf("store attachment: %w", err)
	}
	return sha, n, nil
}

// MediaType returns the lower-cased media type of a Content-Type value
// without its parameters; a missing type is application/octet-stream.
func MediaType(contentType string) string {
	mt := strings.ToLower(strings.TrimSpace(contentType))
	if parsed, _, err := mime.ParseMediaType(contentType); err == nil {
		mt = parsed
	}
	if mt == "" {
		mt = "application/octet-stream"
	}
	return mt
}

// Allows reports whether contentType's media type is on the allowlist.
func (s Store) Allows(contentType string) bool {
	mt := MediaType(contentType)
	for _, a := range s.Allowed {
		if strings.EqualFold(strings.TrimSpace(a), mt) {
			return true
		}
	}
	return false
}

// maxFilename bounds a stored filename, in bytes.
const maxFilename = 200

var dotsRE = regexp.MustCompile(`\.{2,}`)

// SanitizeFilename makes a client's or sender's filename safe to store,
// show and offer for download: only the base name is kept (either slash
// separates directories), control characters and double quotes are
// dropped, runs of dots become "_", leading dots, underscores and spaces go,
// the name is cut to 200 bytes on a character boundary, and an empty
// result is "attachment". So "../context.txt" becomes "context.txt".
func SanitizeFilename(name string) string {
	name = path.Base(strings.ReplaceAll(name, "\\", "/"))
	name = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == '/' || r == '"' {
			return -1
		}
		return r
	}, name)
	name = dotsRE.ReplaceAllString(name, "_")
	name = strings.TrimLeft(strings.TrimSpace(name), "._ ")
	if len(name) > maxFilename {
		cut := maxFilename
		for cut > 0 && !utf8.RuneStart(name[cut]) {
			cut--
		}
		name = name[:cut]
	}
	if name == "" {
		return "attachment"
	}
	return name
}
