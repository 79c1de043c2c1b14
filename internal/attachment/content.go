package attachment

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"

	"github.com/paperclipai/paperclipai/internal/store"
)

// Reader reads stored content chunk by chunk, one statement per chunk.
// Why not one query over all chunks: on SQLite the pool has a single
// connection, and a download to a slow client would hold it (and so stop
// every other database access) for as long as the client takes; separate
// statements hold it for one chunk each. Content is immutable under its
// digest, so reading it across statements is still consistent.
type Reader struct {
	ctx     context.Context
	db      *store.Store
	sha     string
	size    int64
	fetched int64 // bytes of the chunks fetched so far
	seq     int   // the next chunk to fetch
	buf     []byte
	pos     int
}

// Size is the content's length in bytes.
func (r *Reader) Size() int64 { return r.size }

// fill fetches the next chunk into buf; io.EOF after the last one.
func (r *Reader) fill() error {
	if r.fetched == r.size {
		return io.EOF
	}
	chunk, err := r.db.BlobChunk(r.ctx, r.db.DB, r.sha, r.seq, r.buf)
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("read attachment %s: chunk %d: %w", r.sha, r.seq, ErrCorrupt)
	}
	if err != nil {
		return fmt.Errorf("read attachment %s: %w", r.sha, err)
	}
	if len(chunk) == 0 || int64(len(chunk)) > r.size-r.fetched {
		return fmt.Errorf("read attachment %s: chunk %d of %d bytes: %w", r.sha, r.seq, len(chunk), ErrCorrupt)
	}
	r.buf, r.pos = chunk, 0
	r.fetched += int64(len(chunk))
	r.seq++
	return nil
}

// Read implements io.Reader.
func (r *Reader) Read(p []byte) (int, error) {
	if r.pos == len(r.buf) {
		if err := r.fill(); err != nil {
			return 0, err
		}
	}
	n := copy(p, r.buf[r.pos:])
	r.pos += n
	return n, nil
}

// WriteTo writes the rest of the content to w one chunk at a time (so
// io.Copy needs no buffer of its own).
func (r *Reader) WriteTo(w io.Writer) (int64, error) {
	var total int64
	for {
		if r.pos < len(r.buf) {
			n, err := w.Write(r.buf[r.pos:])
			r.pos += n
			total += int64(n)
			if err != nil {
				return total, err
			}
		}
		if err := r.fill(); err == io.EOF {
			return total, nil
		} else if err != nil {
			return total, err
		}
	}
}

// Open returns a reader of the content with the given sha256, its first
// chunk already fetched. Content not
// yet in the database is taken from this home's file from before, when it
// has one that hashes to its name (and is stored, so the next read, on any
// replica, finds it); otherwise it is ErrContentMissing.
func (s Store) Open(ctx context.Context, sha string) (*Reader, error) {
	if !validSHA(sha) {
		return nil, fmt.Errorf("open attachment: invalid digest %q", sha)
	}
	size, err := s.DB.BlobSize(ctx, s.DB.DB, sha)
	if errors.Is(err, store.ErrNotFound) {
		if err = s.backfill(ctx, sha); err != nil {
			return nil, err
		}
		size, err = s.DB.BlobSize(ctx, s.DB.DB, sha)
	}
	if err != nil {
		return nil, fmt.Errorf("open attachment: %w", err)
	}
	r := &Reader{ctx: ctx, db: s.DB, sha: sha, size: size}
	// The first chunk now, so that a read that cannot even start fails
	// here, before a download has sent its status line.
	if err := r.fill(); err != nil && err != io.EOF {
		return nil, err
	}
	return r, nil
}

// errMismatch rolls a backfill back when the file's bytes do not hash to
// its name.
var errMismatch = errors.New("file does not match its digest")

// backfill stores this home's file of content sha in the database: read
// once, hashed while it is written, and rolled back unless it matches.
// No file is ErrContentMissing; a file that does not match is ErrCorrupt.
// A file is never bounded by MaxBytes here: it was accepted when it came.
func (s Store) backfill(ctx context.Context, sha string) error {
	if s.Dir == "" {
		return fmt.Errorf("attachment %s: %w", sha, ErrContentMissing)
	}
	f, err := os.Open(s.LegacyPath(sha))
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("attachment %s: %w", sha, ErrContentMissing)
	}
	if err != nil {
		return fmt.Errorf("backfill attachment %s: %w", sha, err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return fmt.Errorf("backfill attachment %s: %w", sha, err)
	}
	err = s.DB.Tx(ctx, func(tx *sql.Tx) error {
		h := sha256.New()
		created, err := s.DB.PutBlob(ctx, tx, sha, info.Size(), io.TeeReader(f, h))
		if err != nil {
			return err
		}
		if created && hex.EncodeToString(h.Sum(nil)) != sha {
			return errMismatch
		}
		return nil
	})
	if errors.Is(err, errMismatch) {
		return fmt.Errorf("attachment %s: the file %s %w: %w", sha, s.LegacyPath(sha), errMismatch, ErrCorrupt)
	}
	if err != nil {
		return fmt.Errorf("backfill attachment %s: %w", sha, err)
	}
	return nil
}

// BackfillResult counts what Backfill did.
type BackfillResult struct {
	// Stored is how many files were moved into the database.
	Stored int
	// Missing is how many contents this home has no file for (another
	// replica's home may still hold them).
	Missing int
	// Corrupt is how many files did not hash to their names.
	Corrupt int
}

// Backfill moves into the database the content of every attachment row
// whose content is not there yet and whose file this home holds (a home
// from before content moved into the database). Each file is its own
// transaction, so an interruption loses nothing and the next start goes
// on; replicas running it together store each content once. Files are
// left in place (an older binary still reads them); once the log reports
// nothing missing, Dir's files may be deleted.
func (s Store) Backfill(ctx context.Context) (BackfillResult, error) {
	var res BackfillResult
	after := ""
	for {
		page, err := s.DB.MissingBlobs(ctx, s.DB.DB, after, 100)
		if err != nil {
			return res, fmt.Errorf("backfill attachments: %w", err)
		}
		for _, m := range page {
			after = m.SHA256
			if !validSHA(m.SHA256) {
				res.Corrupt++
				continue
			}
			switch err := s.backfill(ctx, m.SHA256); {
			case err == nil:
				res.Stored++
			case errors.Is(err, ErrContentMissing):
				res.Missing++
			case errors.Is(err, ErrCorrupt):
				res.Corrupt++
				s.log(slog.LevelWarn, "attachment file does not match its digest; not backfilled", "sha256", m.SHA256, "err", err)
			default:
				return res, err
			}
		}
		if len(page) < 100 {
			break
		}
	}
	switch {
	case res.Missing+res.Corrupt > 0:
		s.log(slog.LevelWarn, "attachment backfill: some attachments have no content in the database and none in this home (another replica's home may hold them)",
			"stored", res.Stored, "missing", res.Missing, "corrupt", res.Corrupt, "dir", s.Dir)
	case res.Stored > 0:
		s.log(slog.LevelInfo, "attachment backfill: every attachment's content is in the database; the files under dir are no longer read",
			"stored", res.Stored, "dir", s.Dir)
	}
	return res, nil
}

func (s Store) log(level slog.Level, msg string, args ...any) {
	if s.Log != nil {
		s.Log.Log(context.Background(), level, msg, args...)
	}
}
