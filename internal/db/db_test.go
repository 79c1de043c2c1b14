package db_test

import (
	"context"
	"testing"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
)

func TestMigrateIsIdempotent(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		ctx := context.Background()
		if err := d.Migrate(ctx, nil); err != nil {
			t.Fatalf("second migrate: %v", err)
		}
		var n int
		if err := d.QueryRowContext(ctx, `SELECT COUNT(*) FROM companies`).Scan(&n); err != nil {
			t.Fatalf("query: %v", err)
		}
	})
}

func TestUniqueViolationIsRecognised(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		ctx := context.Background()
		q := `INSERT INTO users (id, email, created_at) VALUES ($1, $2, CURRENT_TIMESTAMP)`
		if _, err := d.ExecContext(ctx, q, "u1", "a@example.com"); err != nil {
			t.Fatal(err)
		}
		_, err := d.ExecContext(ctx, q, "u2", "a@example.com")
		if !db.IsUniqueViolation(err) {
			t.Fatalf("want unique violation, got %v", err)
		}
	})
}
