package db_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/paperclipai/paperclipai/internal/db"
)

// The SQLite statement cache is invisible: a statement reused after an
// error, a nested query of the same text while the outer rows are open,
// more distinct statements than the cache holds, and a rolled-back
// transaction all behave as without it.
func TestSQLiteStatementCacheIsTransparent(t *testing.T) {
	ctx := context.Background()
	d, err := db.Open(ctx, "", filepath.Join(t.TempDir(), "c.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := d.ExecContext(ctx, `CREATE TABLE kv (k TEXT PRIMARY KEY, v INTEGER NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	ins := `INSERT INTO kv (k, v) VALUES ($1, $2)`
	for i := range 5 {
		if _, err := d.ExecContext(ctx, ins, fmt.Sprint("k", i), i); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := d.ExecContext(ctx, ins, "k0", 9); !db.IsUniqueViolation(err) {
		t.Fatalf("want unique violation, got %v", err)
	}
	if _, err := d.ExecContext(ctx, ins, "k5", 5); err != nil {
		t.Fatalf("statement unusable after an error: %v", err)
	}

	// Nested: the inner query of the same text runs while the outer rows
	// are open.
	sel := `SELECT k, v FROM kv WHERE v >= $1 ORDER BY k`
	err = d.Tx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, sel, 0)
		if err != nil {
			return err
		}
		defer rows.Close()
		outer := 0
		for rows.Next() {
			var k string
			var v int
			if err := rows.Scan(&k, &v); err != nil {
				return err
			}
			var inner int
			if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM (`+sel+`)`, v).Scan(&inner); err != nil {
				return err
			}
			in, err := tx.QueryContext(ctx, sel, v)
			if err != nil {
				return err
			}
			n := 0
			for in.Next() {
				n++
			}
			in.Close()
			if n != inner || n != 6-v {
				return fmt.Errorf("nested query at v=%d: %d rows, count %d", v, n, inner)
			}
			outer++
		}
		if outer != 6 {
			return fmt.Errorf("outer query: %d rows", outer)
		}
		return rows.Err()
	})
	if err != nil {
		t.Fatal(err)
	}

	// More distinct statements than the cache keeps, twice over.
	for round := range 2 {
		for i := range 300 {
			var v int
			if err := d.QueryRowContext(ctx, fmt.Sprintf(`SELECT v + %d FROM kv WHERE k = $1`, i), "k1").Scan(&v); err != nil {
				t.Fatal(err)
			}
			if v != 1+i {
				t.Fatalf("round %d statement %d: %d", round, i, v)
			}
		}
	}

	// A rolled-back write through a cached statement leaves nothing.
	_ = d.Tx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, ins, "k9", 9); err != nil {
			t.Fatal(err)
		}
		return fmt.Errorf("roll back")
	})
	var n int
	if err := d.QueryRowContext(ctx, `SELECT COUNT(*) FROM kv`).Scan(&n); err != nil || n != 6 {
		t.Fatalf("rows after rollback: %d %v", n, err)
	}
}
