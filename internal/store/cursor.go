package store

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"
)

// The page sizes of every listing (docs/api.md, "Paging").
const (
	DefaultPageLimit = 50
	MaxPageLimit     = 200
)

// ErrBadCursor is a cursor that does not fit its listing (a cursor of
// another order); the API answers it as an invalid cursor.
var ErrBadCursor = errors.New("cursor does not fit this listing")

// Cursor is where a keyset listing continues: after the row with this
// time and id in the listing's order. Key is an optional listing-specific
// leading sort key (a priority rank, a search score), compared before At.
type Cursor struct {
	At  time.Time
	ID  string
	Key string
}

// Page asks for one page of a keyset listing: at most Limit rows after
// After (nil: from the start).
type Page struct {
	Limit  int
	After  *Cursor
	Oldest bool // oldest first instead of newest first
}

// keyset renders a page's WHERE continuation and ORDER BY … LIMIT for a
// listing ordered on (timeCol, idCol), with its arguments numbered from
// $n. The page fetches one row more than Limit: its presence tells the
// caller another page follows.
//
// Why keyset and not OFFSET: rows inserted while a client pages shift an
// offset (the same row is served twice, another never), and OFFSET reads
// and discards every skipped row. The (time, id) pair is unique, so every
// row sorts at exactly one place, whatever arrives meanwhile.
func (p Page) keyset(timeCol, idCol string, n int) (where, order string, args []any) {
	cmp, dir := "<", "DESC"
	if p.Oldest {
		cmp, dir = ">", "ASC"
	}
	if p.After != nil {
		where = fmt.Sprintf(` AND (%[1]s %[3]s $%[4]d OR (%[1]s = $%[4]d AND %[2]s %[3]s $%[5]d))`, timeCol, idCol, cmp, n, n+1)
		args = []any{p.After.At.UTC(), p.After.ID}
	}
	order = fmt.Sprintf(` ORDER BY %[1]s %[3]s, %[2]s %[3]s LIMIT %[4]d`, timeCol, idCol, dir, p.limit()+1)
	return where, order, args
}

// limit is the page size, with DefaultPageLimit for an unset one.
func (p Page) limit() int {
	if p.Limit <= 0 {
		return DefaultPageLimit
	}
	return p.Limit
}

// TrimPage cuts rows (a listing fetched with one row more than the page,
// see Page.keyset) to the page and returns the cursor of the next page:
// the key of the page's last row, or nil when no row follows. It is here,
// beside the page it cuts, so that services page without the HTTP layer.
func TrimPage[T any](rows []T, p Page, key func(T) Cursor) ([]T, *Cursor) {
	limit := p.limit()
	if len(rows) <= limit {
		return rows, nil
	}
	rows = rows[:limit]
	c := key(rows[len(rows)-1])
	return rows, &c
}

// EncodeCursor renders a cursor as the opaque URL-safe token every listing
// hands out. It is here, beside the cursor, so that a service that pages
// (outbound's sends listing) reads its token without the HTTP layer.
func EncodeCursor(c Cursor) string {
	s := c.At.UTC().Format(time.RFC3339Nano) + "|" + c.ID
	if c.Key != "" {
		s += "|" + c.Key
	}
	return base64.RawURLEncoding.EncodeToString([]byte(s))
}

// DecodeCursor parses a token from EncodeCursor whose row id satisfies
// validID; anything else is ErrBadCursor.
func DecodeCursor(v string, validID func(string) bool) (Cursor, error) {
	raw, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil {
		return Cursor{}, ErrBadCursor
	}
	parts := strings.Split(string(raw), "|")
	if len(parts) < 2 || len(parts) > 3 {
		return Cursor{}, ErrBadCursor
	}
	t, terr := time.Parse(time.RFC3339Nano, parts[0])
	if terr != nil || !validID(parts[1]) {
		return Cursor{}, ErrBadCursor
	}
	c := Cursor{At: t, ID: parts[1]}
	if len(parts) == 3 {
		if c.Key = parts[2]; c.Key == "" {
			return Cursor{}, ErrBadCursor
		}
	}
	return c, nil
}
