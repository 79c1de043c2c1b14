// Package store holds all SQL of the control-plane core: one concrete Store
// over database/sql, with hand-written statements in the $N dialect that run
// unchanged on SQLite and PostgreSQL. Functions that must join a caller's
// transaction take a db.Querier.
package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/paperclipai/paperclipai/internal/db"
)

// ErrNotFound is returned when a row does not exist (or is not visible).
// The store returns it as a *NotFoundError naming the missing thing.
var ErrNotFound = errors.New("not found")

// NotFoundError is ErrNotFound for one operation (the io/fs PathError
// pattern): errors.Is(err, ErrNotFound) holds, and What names the missing
// thing for people without parsing the error text.
type NotFoundError struct {
	Op   string // the operation, for logs: "get issue"
	What string // the missing thing: "issue"; "" when it has no name
}

// NotFound returns the *NotFoundError of op; What is the thing op gets or
// looks up ("get email inbox" → "email inbox"), else empty.
func NotFound(op string) *NotFoundError {
	what := ""
	for _, verb := range []string{"get ", "lookup "} {
		if rest, ok := strings.CutPrefix(op, verb); ok {
			what = rest
		}
	}
	return &NotFoundError{Op: op, What: what}
}

func (e *NotFoundError) Error() string { return e.Op + ": not found" }

// Is makes errors.Is(err, ErrNotFound) hold.
func (e *NotFoundError) Is(target error) bool { return target == ErrNotFound }

// ErrConflict is returned when a write collides with an existing row.
var ErrConflict = errors.New("conflict")

// Store is the control plane's data access layer.
type Store struct {
	DB *db.DB
	// now is the clock. It is read by every goroutine of a running server
	// (the HTTP handlers and the background workers) and may be replaced
	// while they run, so it is swapped atomically.
	now atomic.Pointer[func() time.Time]
}

// New returns a Store over d.
func New(d *db.DB) *Store {
	s := &Store{DB: d}
	s.SetClock(time.Now)
	return s
}

// SetClock replaces the store's clock (tests only). It is safe while the
// store is in use, for example under a running server's workers.
func (s *Store) SetClock(now func() time.Time) { s.now.Store(&now) }

// Now returns the current time in UTC truncated to microseconds, the
// precision both databases keep, so written and read-back values compare equal.
func (s *Store) Now() time.Time { return (*s.now.Load())().UTC().Truncate(time.Microsecond) }

// Tx runs fn in a transaction.
func (s *Store) Tx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	return s.DB.Tx(ctx, fn)
}

// NewID returns a new random UUID string.
func NewID() string { return uuid.NewString() }

// ValidID reports whether s is a canonical UUID string.
func ValidID(s string) bool {
	if len(s) != 36 {
		return false
	}
	_, err := uuid.Parse(s)
	return err == nil
}

// RandomToken returns a URL-safe random token with the given prefix.
func RandomToken(prefix string) string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	out := make([]byte, len(b))
	for i, v := range b {
		out[i] = alphabet[int(v)%len(alphabet)]
	}
	return prefix + string(out)
}

// nullString maps "" to SQL NULL.
func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// nullTime maps nil to SQL NULL and always binds UTC.
func nullTime(t *time.Time) any {
	if t == nil {
		return nil
	}
	return t.UTC()
}

// nullJSON maps an empty or "null" raw message to SQL NULL.
func nullJSON(raw json.RawMessage) any {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	return string(raw)
}

// mustJSON encodes v, which is always a marshalable internal value.
func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("store: marshal %T: %v", v, err))
	}
	return string(b)
}

func timePtr(nt sql.NullTime) *time.Time {
	if !nt.Valid {
		return nil
	}
	t := nt.Time.UTC()
	return &t
}

func rawJSON(b []byte) json.RawMessage {
	if len(b) == 0 {
		return nil
	}
	return json.RawMessage(append([]byte(nil), b...))
}

// notFound maps sql.ErrNoRows to ErrNotFound with context.
func notFound(what string, err error) error {
	if errors.Is(err, sql.ErrNoRows) {
		return NotFound(what)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// rowScanner is satisfied by *sql.Row and *sql.Rows.
type rowScanner interface{ Scan(...any) error }

// joinedRow scans one row holding two records side by side (a join) with
// their own scan functions: Scan receives the first record's
// destinations, then runs second with a scanner that receives the rest
// and scans the whole row at once. The first scan function's decoding
// runs after both records are read.
type joinedRow struct {
	row    rowScanner
	second func(rowScanner) error
}

// Scan implements rowScanner.
func (j joinedRow) Scan(first ...any) error {
	return j.second(scanFunc(func(rest ...any) error { return j.row.Scan(append(first, rest...)...) }))
}

// scanFunc adapts a function to rowScanner.
type scanFunc func(...any) error

// Scan implements rowScanner.
func (f scanFunc) Scan(dest ...any) error { return f(dest...) }

// prefixCols qualifies a comma-separated column list with a table alias
// ("a." + each column).
func prefixCols(alias, cols string) string {
	parts := strings.Split(cols, ",")
	for i, c := range parts {
		parts[i] = alias + strings.TrimSpace(c)
	}
	return strings.Join(parts, ", ")
}

// queryAll runs query and scans every row with scan; what names the
// operation in errors. It always returns a non-nil slice so lists encode as [].
func queryAll[T any](ctx context.Context, q db.Querier, what string, scan func(rowScanner) (T, error), query string, args ...any) ([]T, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer rows.Close()
	out := []T{}
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

// queryOne runs query and scans its single row; a missing row is ErrNotFound.
func queryOne[T any](ctx context.Context, q db.Querier, what string, scan func(rowScanner) (T, error), query string, args ...any) (T, error) {
	v, err := scan(q.QueryRowContext(ctx, query, args...))
	if err != nil {
		return v, notFound(what, err)
	}
	return v, nil
}

// insertedOrExisting ends an idempotent INSERT ... ON CONFLICT DO NOTHING:
// it reports whether the statement inserted the row and, when another
// writer's row won the conflict, loads that row into v, so every caller
// leaves with the stored row either way.
func insertedOrExisting[T any](res sql.Result, v *T, existing func() (T, error)) (bool, error) {
	if n, _ := res.RowsAffected(); n == 1 {
		return true, nil
	}
	cur, err := existing()
	if err != nil {
		return false, err
	}
	*v = cur
	return false, nil
}

// existingAmong returns which of values already stand in column of an
// endpoint's rows of table (both fixed by the caller, never input; the
// pair must be a unique key), in one query per 200 values.
//
// Why two shapes: on PostgreSQL an IN list lets the planner use only
// endpoint_id as the index condition and filter every row of the endpoint
// (it does so on a table autovacuum has not analyzed yet, such as a new
// install's first minutes: measured 0.6 ms per lookup at 600 rows,
// growing with the table). The lateral join with LIMIT 1 can only be run
// as one unique-index probe per value, whatever the statistics say, and
// it is one prepared statement whatever the number of values. SQLite's
// planner probes the unique index for an IN list.
func (s *Store) existingAmong(ctx context.Context, q db.Querier, what, table, column, endpointID string, values []string) (map[string]bool, error) {
	out := map[string]bool{}
	scan := func(r rowScanner) (string, error) {
		var v string
		return v, r.Scan(&v)
	}
	for start := 0; start < len(values); start += 200 {
		chunk := values[start:min(start+200, len(values))]
		var found []string
		var err error
		if s.DB.Dialect == db.Postgres {
			found, err = queryAll(ctx, q, what, scan, `SELECT k.v `+probeKeys(table, column, "$1", "$2"), endpointID, chunk)
		} else {
			args := []any{endpointID}
			ph := make([]string, len(chunk))
			for i, v := range chunk {
				args = append(args, v)
				ph[i] = fmt.Sprintf("$%d", i+2)
			}
			found, err = queryAll(ctx, q, what, scan, `SELECT `+column+` FROM `+table+` WHERE endpoint_id = $1 AND `+column+` IN (`+strings.Join(ph, ", ")+`)`, args...)
		}
		if err != nil {
			return nil, err
		}
		for _, v := range found {
			out[v] = true
		}
	}
	return out, nil
}

// probeKeys is the FROM clause of existingAmong's PostgreSQL shape: the
// values of the text array parameter keys (as k.v) that stand in column of
// the rows of table whose endpoint_id is the parameter endpoint, one
// unique-index probe per value.
func probeKeys(table, column, endpoint, keys string) string {
	return `FROM unnest(` + keys + `::text[]) AS k(v) CROSS JOIN LATERAL (SELECT 1 FROM ` + table + ` t
		WHERE t.endpoint_id = ` + endpoint + ` AND t.` + column + ` = k.v LIMIT 1) hit`
}

// execOne runs a statement that must touch a row: a failure is wrapped with
// op, and no row affected is the NotFoundError of missing.
func execOne(ctx context.Context, q db.Querier, op, missing, query string, args ...any) error {
	res, err := q.ExecContext(ctx, query, args...)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return NotFound(missing)
	}
	return nil
}
