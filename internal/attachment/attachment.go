// Package attachment stores task attachments by content and holds the one
// set of rules for their names and media types. Content lives in the
// database (attachment_blobs, in chunks), once per sha256, so every replica
// on one PostgreSQL database serves and sends what any replica took in,
// and a SQLite backup holds it too. Uploads through the API, mail imported
// by the inbound pipeline and attachments sent by the outbound worker all
// use it. Homes from before kept content as files under Dir; those are
// moved into the database by Backfill, and by Open on first read.
package attachment

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"mime"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/paperclipai/paperclipai/internal/safetext"
	"github.com/paperclipai/paperclipai/internal/store"
)

// ErrTooLarge means the content exceeds the store's MaxBytes.
var ErrTooLarge = errors.New("attachment too large")

// ErrContentMissing means an attachment's content is neither in the
// database nor, as a file from before content moved there, in this home.
var ErrContentMissing = errors.New("attachment content missing")

// ErrCorrupt means stored content does not add up to its recorded size, or
// a file from before does not hash to its name.
var ErrCorrupt = errors.New("attachment content corrupt")

// Store is the content-addressed attachment store.
type Store struct {
	// DB holds the content; it is the store of record.
	DB *store.Store
	// Dir is where uploads are staged while they are hashed and measured
	// (created on first use), and where homes from before this store kept
	// content as files (Dir/<sha[:2]>/<sha>), read only to backfill.
	Dir string
	// MaxBytes bounds one attachment.
	MaxBytes int64
	// Allowed lists the accepted media types, compared without parameters.
	Allowed []string
	// Log receives the backfill's reports; nil discards them.
	Log *slog.Logger
}

// validSHA reports whether sha is a lower-case hex sha256, the only shape
// that is ever put into a file path or a query.
func validSHA(sha string) bool {
	if len(sha) != sha256.Size*2 {
		return false
	}
	for _, c := range sha {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// LegacyPath is where a home from before content moved into the database
// kept the content with the given sha256.
func (s Store) LegacyPath(sha string) string { return filepath.Join(s.Dir, sha[:2], sha) }

// Staged is content spooled to a temporary file and hashed, ready to be
// saved in a transaction. Close removes the file.
type Staged struct {
	// SHA256 is the content's digest, lower-case hex.
	SHA256 string
	// Size is the content's length in bytes.
	Size int64
	f    *os.File
}

// Close removes the staged file.
func (st *Staged) Close() error {
	if st == nil || st.f == nil {
		return nil
	}
	err := st.f.Close()
	if rerr := os.Remove(st.f.Name()); err == nil && !errors.Is(rerr, fs.ErrNotExist) {
		err = rerr
	}
	st.f = nil
	return err
}

// Stage streams r into a temporary file under Dir while hashing it, so the
// content is measured and named before anything reaches the database and
// memory holds only a copy buffer. Content over MaxBytes is ErrTooLarge
// (nothing is kept). The caller saves the result with Save and closes it.
func (s Store) Stage(r io.Reader) (*Staged, error) {
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("stage attachment: %w", err)
	}
	f, err := os.CreateTemp(s.Dir, ".upload-*")
	if err != nil {
		return nil, fmt.Errorf("stage attachment: %w", err)
	}
	st := &Staged{f: f}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), io.LimitReader(r, s.MaxBytes+1))
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("stage attachment: %w", err)
	}
	if n > s.MaxBytes {
		st.Close()
		return nil, ErrTooLarge
	}
	st.SHA256, st.Size = hex.EncodeToString(h.Sum(nil)), n
	return st, nil
}

// SweepStaged removes staged files older than age: left behind by a
// process that died during an upload (a live upload's file is younger
// than any upload takes). It returns how many it removed.
func (s Store) SweepStaged(age time.Duration) (int, error) {
	names, err := filepath.Glob(filepath.Join(s.Dir, ".upload-*"))
	if err != nil {
		return 0, fmt.Errorf("sweep staged attachments: %w", err)
	}
	n := 0
	for _, name := range names {
		info, err := os.Lstat(name)
		if err != nil || !info.Mode().IsRegular() || time.Since(info.ModTime()) < age {
			continue
		}
		if err := os.Remove(name); err == nil {
			n++
		}
	}
	return n, nil
}

// Save stores staged content in the database inside tx (the caller's
// transaction, which also inserts the attachment row). Identical content
// already stored is not written again.
func (s Store) Save(ctx context.Context, tx *sql.Tx, st *Staged) error {
	if _, err := st.f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("save attachment: %w", err)
	}
	if _, err := s.DB.PutBlob(ctx, tx, st.SHA256, st.Size, st.f); err != nil {
		return fmt.Errorf("save attachment: %w", err)
	}
	return nil
}

// PutBytes stores content already in memory (an email attachment as
// downloaded) in its own transaction and returns its sha256. Content over
// MaxBytes is ErrTooLarge.
func (s Store) PutBytes(ctx context.Context, data []byte) (string, error) {
	if int64(len(data)) > s.MaxBytes {
		return "", ErrTooLarge
	}
	sum := sha256.Sum256(data)
	sha := hex.EncodeToString(sum[:])
	err := s.DB.Tx(ctx, func(tx *sql.Tx) error {
		_, err := s.DB.PutBlob(ctx, tx, sha, int64(len(data)), bytes.NewReader(data))
		return err
	})
	if err != nil {
		return "", fmt.Errorf("store attachment: %w", err)
	}
	return sha, nil
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
// separates directories), control characters, Unicode format characters
// (bidirectional overrides that make "invoice\u202efdp.exe" read as
// "invoiceexe.pdf", zero-width characters) and double quotes are dropped, runs of dots become "_", leading dots, underscores and spaces go,
// the name is cut to 200 bytes on a character boundary, and an empty
// result is "attachment". So "../context.txt" becomes "context.txt".
func SanitizeFilename(name string) string {
	name = path.Base(strings.ReplaceAll(name, "\\", "/"))
	name = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || safetext.IsFormat(r) || r == '/' || r == '"' {
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
