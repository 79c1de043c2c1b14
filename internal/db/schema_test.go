package db_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/paperclipai/paperclipai/internal/buildinfo"
	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
)

// TestSchemaRecordsBinaryAndRefusesNewer: a migrated database names the
// binary that migrated it; a database that a newer binary migrated (a
// migration this binary does not embed) is refused with both versions
// named, and nothing is written to it.
func TestSchemaRecordsBinaryAndRefusesNewer(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		ctx := context.Background()
		s, err := d.Schema(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if s.Current != s.Latest || len(s.Pending) != 0 || s.MigratedBy != buildinfo.Version || s.MigratedAt.IsZero() {
			t.Fatalf("schema after migrate = %+v", s)
		}
		if err := d.CheckCurrent(ctx); err != nil {
			t.Fatalf("check current: %v", err)
		}

		// A newer binary applied migration 99999 and recorded itself.
		if _, err := d.ExecContext(ctx, `INSERT INTO goose_db_version (version_id, is_applied) VALUES (99999, true)`); err != nil {
			t.Fatal(err)
		}
		if _, err := d.ExecContext(ctx, `UPDATE schema_meta SET schema_version = 99999, binary_version = '99.0.0'`); err != nil {
			t.Fatal(err)
		}
		err = d.Migrate(ctx, nil)
		if !errors.Is(err, db.ErrSchemaNewer) {
			t.Fatalf("migrate on a newer schema: %v, want ErrSchemaNewer", err)
		}
		for _, want := range []string{"99999", "paperclipai 99.0.0", buildinfo.Version} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("refusal %q does not name %q", err, want)
			}
		}
		if err := d.CheckCurrent(ctx); !errors.Is(err, db.ErrSchemaNewer) {
			t.Fatalf("check current on a newer schema: %v", err)
		}
		var by string
		if err := d.QueryRowContext(ctx, `SELECT binary_version FROM schema_meta`).Scan(&by); err != nil || by != "99.0.0" {
			t.Fatalf("the refused binary overwrote schema_meta: %q, %v", by, err)
		}
	})
}

// TestSchemaListsPendingMigrations: a migration missing from the database
// is listed as pending (what `admin migrate --dry-run` prints), the check
// for a server without automatic migration fails, and Migrate applies it.
func TestSchemaListsPendingMigrations(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		ctx := context.Background()
		s, err := d.Schema(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// Roll back to before schema_meta, with the Down sections.
		if err := db.DownTo(ctx, d, 22); err != nil {
			t.Fatal(err)
		}
		p, err := d.Schema(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Pending) == 0 || p.Pending[0].Version != 23 || p.Pending[0].Name != "00023_schema_meta.sql" || p.MigratedBy != "" {
			t.Fatalf("pending = %+v", p)
		}
		if err := d.CheckCurrent(ctx); !errors.Is(err, db.ErrSchemaPending) {
			t.Fatalf("check current with a pending migration: %v", err)
		}
		applied, err := d.MigrateReport(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(applied) != len(p.Pending) || applied[0].Version != 23 {
			t.Fatalf("applied %+v, want %+v", applied, p.Pending)
		}
		if s2, err := d.Schema(ctx); err != nil || s2.Current != s.Latest || len(s2.Pending) != 0 || s2.MigratedBy != buildinfo.Version {
			t.Fatalf("after migrate: %+v, %v", s2, err)
		}
	})
}
