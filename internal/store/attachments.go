package store

import (
	"context"
	"database/sql"
	"fmt"
	"io"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/domain"
)

const attachmentCols = `id, company_id, issue_id, filename, content_type, size_bytes, sha256, created_by_user_id, created_by_agent_id, created_at`

func scanAttachment(row rowScanner) (domain.Attachment, error) {
	var a domain.Attachment
	var byUser, byAgent sql.NullString
	err := row.Scan(&a.ID, &a.CompanyID, &a.IssueID, &a.Filename, &a.ContentType, &a.SizeBytes, &a.SHA256, &byUser, &byAgent, &a.CreatedAt)
	a.CreatedByUserID, a.CreatedByAgentID = byUser.String, byAgent.String
	a.CreatedAt = a.CreatedAt.UTC()
	return a, err
}

// CreateAttachment inserts a's metadata. Its content (a.SHA256) is stored
// with PutBlob, in the same transaction or before.
func (s *Store) CreateAttachment(ctx context.Context, q db.Querier, a *domain.Attachment) error {
	a.ID = NewID()
	a.CreatedAt = s.Now()
	_, err := q.ExecContext(ctx, `INSERT INTO attachments (`+attachmentCols+`) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10)`,
		a.ID, a.CompanyID, a.IssueID, a.Filename, a.ContentType, a.SizeBytes, a.SHA256,
		nullString(a.CreatedByUserID), nullString(a.CreatedByAgentID), a.CreatedAt)
	if err != nil {
		return fmt.Errorf("create attachment: %w", err)
	}
	return nil
}

// GetAttachment returns attachment metadata by id.
func (s *Store) GetAttachment(ctx context.Context, q db.Querier, id string) (domain.Attachment, error) {
	return queryOne(ctx, q, "get attachment", scanAttachment, `SELECT `+attachmentCols+` FROM attachments WHERE id = $1`, id)
}

// ListAttachments returns a task's attachments, newest first.
func (s *Store) ListAttachments(ctx context.Context, q db.Querier, issueID string) ([]domain.Attachment, error) {
	return queryAll(ctx, q, "list attachments", scanAttachment,
		`SELECT `+attachmentCols+` FROM attachments WHERE issue_id = $1 ORDER BY created_at DESC, id`, issueID)
}

// BlobChunkBytes is the largest chunk of attachment content one row of
// attachment_blob_chunks holds. Small enough that a write or a read holds
// little in memory and no statement carries a whole file, large enough
// that a 10 MiB file is 40 statements.
const BlobChunkBytes = 256 << 10

// PutBlob stores the content named sha (its sha256, lower-case hex) of
// size bytes, read from r in BlobChunkBytes chunks, inside tx: the blob row
// and its chunks commit together, so a blob that is visible is complete.
// Content already stored is not read again (created is false): the digest
// names the bytes, so they are the same. A reader that ends before or
// after size bytes is an error, and tx must then be rolled back.
func (s *Store) PutBlob(ctx context.Context, tx *sql.Tx, sha string, size int64, r io.Reader) (created bool, err error) {
	// ON CONFLICT DO NOTHING: two replicas storing the same new content
	// race on the primary key; on PostgreSQL the second waits for the
	// first's transaction and then inserts nothing (or inserts, if the
	// first rolled back), so exactly one set of chunks is ever written.
	res, err := tx.ExecContext(ctx, `INSERT INTO attachment_blobs (sha256, size_bytes, created_at) VALUES ($1, $2, $3)
		ON CONFLICT (sha256) DO NOTHING`, sha, size, s.Now())
	if err != nil {
		return false, fmt.Errorf("put attachment blob: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return false, fmt.Errorf("put attachment blob: %w", err)
	} else if n == 0 {
		return false, nil
	}
	buf := make([]byte, BlobChunkBytes)
	var total int64
	for seq := 0; ; seq++ {
		n, rerr := io.ReadFull(r, buf)
		if n > 0 {
			total += int64(n)
			if total > size {
				return false, fmt.Errorf("put attachment blob: content longer than %d bytes", size)
			}
			// Both drivers copy a []byte argument while binding it, so
			// buf is reused for the next chunk.
			if _, err := tx.ExecContext(ctx, `INSERT INTO attachment_blob_chunks (sha256, seq, data) VALUES ($1, $2, $3)`,
				sha, seq, buf[:n]); err != nil {
				return false, fmt.Errorf("put attachment blob chunk %d: %w", seq, err)
			}
		}
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			break
		}
		if rerr != nil {
			return false, fmt.Errorf("put attachment blob: read content: %w", rerr)
		}
	}
	if total != size {
		return false, fmt.Errorf("put attachment blob: content is %d bytes, want %d", total, size)
	}
	return true, nil
}

// BlobSize returns the size of the stored content sha; content not in the
// database is ErrNotFound.
func (s *Store) BlobSize(ctx context.Context, q db.Querier, sha string) (int64, error) {
	var n int64
	if err := q.QueryRowContext(ctx, `SELECT size_bytes FROM attachment_blobs WHERE sha256 = $1`, sha).Scan(&n); err != nil {
		return 0, notFound("get attachment content", err)
	}
	return n, nil
}

// BlobChunk appends chunk seq of the content sha to dst[:0] and returns it
// (dst's array is reused when large enough); a missing chunk is
// ErrNotFound.
func (s *Store) BlobChunk(ctx context.Context, q db.Querier, sha string, seq int, dst []byte) ([]byte, error) {
	rows, err := q.QueryContext(ctx, `SELECT data FROM attachment_blob_chunks WHERE sha256 = $1 AND seq = $2`, sha, seq)
	if err != nil {
		return nil, fmt.Errorf("get attachment content chunk: %w", err)
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("get attachment content chunk: %w", err)
		}
		return nil, NotFound("get attachment content chunk")
	}
	// RawBytes points into the driver's row buffer: copied into dst before
	// the next Next or Close, without an allocation per chunk.
	var raw sql.RawBytes
	if err := rows.Scan(&raw); err != nil {
		return nil, fmt.Errorf("get attachment content chunk: %w", err)
	}
	dst = append(dst[:0], raw...)
	return dst, rows.Close()
}

// MissingBlob is content that attachment rows name but the database does
// not hold: rows written before content moved into the database.
type MissingBlob struct {
	SHA256    string
	SizeBytes int64
}

// MissingBlobs returns up to limit contents named by attachment rows and
// absent from attachment_blobs, in digest order after the digest after
// ("" to start), for paging.
func (s *Store) MissingBlobs(ctx context.Context, q db.Querier, after string, limit int) ([]MissingBlob, error) {
	return queryAll(ctx, q, "list missing attachment content", func(r rowScanner) (MissingBlob, error) {
		var m MissingBlob
		return m, r.Scan(&m.SHA256, &m.SizeBytes)
	}, `SELECT a.sha256, MIN(a.size_bytes) FROM attachments a
		WHERE a.sha256 > $1 AND NOT EXISTS (SELECT 1 FROM attachment_blobs b WHERE b.sha256 = a.sha256)
		GROUP BY a.sha256 ORDER BY a.sha256 LIMIT $2`, after, limit)
}
