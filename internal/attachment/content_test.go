package attachment_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/attachment"
	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/store"
)

func random(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func count(t *testing.T, d *db.DB, query string, args ...any) int {
	t.Helper()
	var n int
	if err := d.QueryRowContext(context.Background(), query, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// readAll reads content sha back through Open, by Read and by WriteTo.
func readAll(t *testing.T, s attachment.Store, sha string) []byte {
	t.Helper()
	r, err := s.Open(context.Background(), sha)
	if err != nil {
		t.Fatalf("open %s: %v", sha, err)
	}
	var viaRead bytes.Buffer
	if _, err := io.CopyBuffer(&viaRead, struct{ io.Reader }{r}, make([]byte, 1000)); err != nil {
		t.Fatalf("read %s: %v", sha, err)
	}
	r, err = s.Open(context.Background(), sha)
	if err != nil {
		t.Fatal(err)
	}
	var viaWriteTo bytes.Buffer
	if _, err := r.WriteTo(&viaWriteTo); err != nil {
		t.Fatalf("write %s: %v", sha, err)
	}
	if !bytes.Equal(viaRead.Bytes(), viaWriteTo.Bytes()) || int64(viaRead.Len()) != r.Size() {
		t.Fatalf("Read and WriteTo disagree: %d / %d bytes, size %d", viaRead.Len(), viaWriteTo.Len(), r.Size())
	}
	return viaRead.Bytes()
}

// legacyRow records an attachment the way a server before the blob table
// did: the row in the database, the bytes only as a file in its home.
func legacyRow(t *testing.T, s attachment.Store, issue domain.Issue, data []byte, fileBytes []byte) string {
	t.Helper()
	sha := digest(data)
	if fileBytes != nil {
		if err := os.MkdirAll(filepath.Dir(s.LegacyPath(sha)), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(s.LegacyPath(sha), fileBytes, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	a := domain.Attachment{CompanyID: issue.CompanyID, IssueID: issue.ID, Filename: "old.bin", ContentType: "application/zip",
		SizeBytes: int64(len(data)), SHA256: sha}
	if err := s.DB.CreateAttachment(context.Background(), s.DB.DB, &a); err != nil {
		t.Fatal(err)
	}
	return sha
}

func TestContent(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		ctx := context.Background()
		st := store.New(d)
		s := attachment.Store{DB: st, Dir: filepath.Join(t.TempDir(), "attachments"), MaxBytes: 1 << 20}
		staged := func(data []byte) string {
			t.Helper()
			sf, err := s.Stage(bytes.NewReader(data))
			if err != nil {
				t.Fatal(err)
			}
			defer sf.Close()
			if sf.SHA256 != digest(data) || sf.Size != int64(len(data)) {
				t.Fatalf("staged %s/%d, want %s/%d", sf.SHA256, sf.Size, digest(data), len(data))
			}
			if err := st.Tx(ctx, func(tx *sql.Tx) error { return s.Save(ctx, tx, sf) }); err != nil {
				t.Fatal(err)
			}
			return sf.SHA256
		}

		t.Run("round trip in chunks", func(t *testing.T) {
			for _, n := range []int{0, 1, store.BlobChunkBytes, store.BlobChunkBytes + 1, 1 << 20} {
				data := random(t, n)
				sha := staged(data)
				if got := readAll(t, s, sha); !bytes.Equal(got, data) {
					t.Fatalf("%d bytes: read back %d different bytes", n, len(got))
				}
				want := (n + store.BlobChunkBytes - 1) / store.BlobChunkBytes
				if c := count(t, d, `SELECT COUNT(*) FROM attachment_blob_chunks WHERE sha256 = $1`, sha); c != want {
					t.Fatalf("%d bytes in %d chunks, want %d", n, c, want)
				}
			}
		})

		t.Run("identical content is stored once", func(t *testing.T) {
			data := random(t, 1000)
			sha := staged(data)
			if again, err := s.PutBytes(ctx, data); err != nil || again != sha {
				t.Fatalf("PutBytes of the same bytes: %q %v", again, err)
			}
			staged(data)
			if c := count(t, d, `SELECT COUNT(*) FROM attachment_blob_chunks WHERE sha256 = $1`, sha); c != 1 {
				t.Fatalf("%d chunks for one stored content", c)
			}
		})

		t.Run("over the size bound nothing is kept", func(t *testing.T) {
			before := count(t, d, `SELECT COUNT(*) FROM attachment_blobs`)
			if _, err := s.Stage(bytes.NewReader(random(t, 1<<20+1))); !errors.Is(err, attachment.ErrTooLarge) {
				t.Fatalf("Stage over MaxBytes: %v", err)
			}
			if _, err := s.PutBytes(ctx, random(t, 1<<20+1)); !errors.Is(err, attachment.ErrTooLarge) {
				t.Fatalf("PutBytes over MaxBytes: %v", err)
			}
			if after := count(t, d, `SELECT COUNT(*) FROM attachment_blobs`); after != before {
				t.Fatalf("blobs %d → %d", before, after)
			}
			left, _ := filepath.Glob(filepath.Join(s.Dir, ".upload-*"))
			if len(left) != 0 {
				t.Fatalf("staging files left behind: %v", left)
			}
		})

		t.Run("staged files left by a crash are swept", func(t *testing.T) {
			if err := os.MkdirAll(s.Dir, 0o700); err != nil {
				t.Fatal(err)
			}
			old, fresh := filepath.Join(s.Dir, ".upload-old"), filepath.Join(s.Dir, ".upload-fresh")
			for _, p := range []string{old, fresh} {
				if err := os.WriteFile(p, []byte("partial"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			then := time.Now().Add(-2 * time.Hour)
			if err := os.Chtimes(old, then, then); err != nil {
				t.Fatal(err)
			}
			if n, err := s.SweepStaged(time.Hour); err != nil || n != 1 {
				t.Fatalf("swept %d (%v), want 1", n, err)
			}
			if _, err := os.Stat(old); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("the old staged file is still there: %v", err)
			}
			if _, err := os.Stat(fresh); err != nil {
				t.Fatalf("a fresh staged file was removed: %v", err)
			}
			os.Remove(fresh)
		})

		t.Run("a missing chunk is corrupt", func(t *testing.T) {
			data := random(t, store.BlobChunkBytes+10)
			sha := staged(data)
			if _, err := d.ExecContext(ctx, `DELETE FROM attachment_blob_chunks WHERE sha256 = $1 AND seq = 1`, sha); err != nil {
				t.Fatal(err)
			}
			r, err := s.Open(ctx, sha)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.Copy(io.Discard, r); !errors.Is(err, attachment.ErrCorrupt) {
				t.Fatalf("read of a blob missing a chunk: %v", err)
			}
			// Without its first chunk, it fails at Open (before a
			// download answers anything).
			if _, err := d.ExecContext(ctx, `DELETE FROM attachment_blob_chunks WHERE sha256 = $1`, sha); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Open(ctx, sha); !errors.Is(err, attachment.ErrCorrupt) {
				t.Fatalf("open of a blob without chunks: %v", err)
			}
		})

		t.Run("files from before are backfilled", func(t *testing.T) {
			co, err := st.CreateCompany(ctx, d, "Legacy", "")
			if err != nil {
				t.Fatal(err)
			}
			issue := domain.Issue{CompanyID: co.ID, Title: "old files"}
			if _, err := st.CreateIssue(ctx, d, &issue); err != nil {
				t.Fatal(err)
			}
			onRead := random(t, 300<<10)
			shaRead := legacyRow(t, s, issue, onRead, onRead)
			atStart := random(t, 5000)
			shaStart := legacyRow(t, s, issue, atStart, atStart)
			shaGone := legacyRow(t, s, issue, random(t, 10), nil)
			shaBad := legacyRow(t, s, issue, random(t, 10), []byte("tampered!!"))
			// Lazily, on first read.
			if got := readAll(t, s, shaRead); !bytes.Equal(got, onRead) {
				t.Fatal("legacy file read back wrong")
			}
			if c := count(t, d, `SELECT COUNT(*) FROM attachment_blobs WHERE sha256 = $1`, shaRead); c != 1 {
				t.Fatal("the first read did not store the file's content")
			}
			// At start: the rest, each counted.
			res, err := s.Backfill(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if res != (attachment.BackfillResult{Stored: 1, Missing: 1, Corrupt: 1}) {
				t.Fatalf("backfill: %+v", res)
			}
			if err := os.Remove(s.LegacyPath(shaStart)); err != nil {
				t.Fatal(err)
			}
			if got := readAll(t, s, shaStart); !bytes.Equal(got, atStart) {
				t.Fatal("backfilled content read back wrong")
			}
			if _, err := s.Open(ctx, shaGone); !errors.Is(err, attachment.ErrContentMissing) {
				t.Fatalf("open without content or file: %v", err)
			}
			if _, err := s.Open(ctx, shaBad); !errors.Is(err, attachment.ErrCorrupt) {
				t.Fatalf("open of a tampered file: %v", err)
			}
			if c := count(t, d, `SELECT COUNT(*) FROM attachment_blobs WHERE sha256 IN ($1, $2)`, shaGone, shaBad); c != 0 {
				t.Fatal("content stored for a missing or tampered file")
			}
			// Again: nothing new to do.
			if res, err := s.Backfill(ctx); err != nil || res != (attachment.BackfillResult{Missing: 1, Corrupt: 1}) {
				t.Fatalf("second backfill: %+v %v", res, err)
			}
		})
	})
}
