package db

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path"
	"time"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/paperclipai/paperclipai/internal/buildinfo"
)

// ErrSchemaNewer means the database was migrated by a newer binary than
// this one: this binary does not know its schema and must not write to it.
// The server refuses to start with exit code ExitSchemaNewer.
var ErrSchemaNewer = errors.New("the database schema is newer than this binary")

// ErrSchemaPending means migrations are pending while automatic migration
// is off (PAPERCLIP_AUTO_MIGRATE=false): `paperclipai admin migrate`
// applies them.
var ErrSchemaPending = errors.New("the database has pending migrations")

// Exit codes of `paperclipai run` (and admin commands) for a schema the
// binary cannot serve; documented in docs/deployment.md, "Upgrades". The
// packaged systemd unit lists them in RestartPreventExitStatus: restarting
// the same binary cannot help.
const (
	ExitSchemaNewer   = 3
	ExitSchemaPending = 4
)

// Migration is one embedded migration.
type Migration struct {
	Version int64  `json:"version"`
	Name    string `json:"name"`
}

// Schema is the state of the database's schema as this binary sees it.
type Schema struct {
	// Current is the highest migration applied to the database (0 when
	// none), Latest the highest this binary embeds.
	Current int64 `json:"current"`
	Latest  int64 `json:"latest"`
	// Pending lists the embedded migrations not applied yet, in order.
	Pending []Migration `json:"pending"`
	// MigratedBy and MigratedAt are the binary version that last applied
	// migrations and when (empty before schema_meta exists).
	MigratedBy string    `json:"migratedBy,omitempty"`
	MigratedAt time.Time `json:"migratedAt,omitzero"`
}

// Newer reports whether the database is ahead of this binary.
func (s Schema) Newer() bool { return s.Current > s.Latest }

// provider builds the goose provider for the database's dialect. With
// locking, on PostgreSQL it holds a session advisory lock while it
// migrates, so several replicas starting together on one database apply
// each migration exactly once.
func (d *DB) provider(locking bool) (*goose.Provider, error) {
	sub, err := fs.Sub(migrationsFS, "migrations/"+string(d.Dialect))
	if err != nil {
		return nil, err
	}
	var opts []goose.ProviderOption
	dialect := goose.DialectSQLite3
	if d.Dialect == Postgres {
		dialect = goose.DialectPostgres
		if locking {
			locker, err := lock.NewPostgresSessionLocker(lock.WithLockTimeout(1, 300))
			if err != nil {
				return nil, fmt.Errorf("locker: %w", err)
			}
			opts = append(opts, goose.WithSessionLocker(locker))
		}
	}
	return goose.NewProvider(dialect, d.DB, sub, opts...)
}

// Schema reads the database's schema state without changing anything but
// goose's version table (created empty when missing).
func (d *DB) Schema(ctx context.Context) (Schema, error) {
	p, err := d.provider(false)
	if err != nil {
		return Schema{}, fmt.Errorf("schema: %w", err)
	}
	return d.schema(ctx, p)
}

func (d *DB) schema(ctx context.Context, p *goose.Provider) (Schema, error) {
	var s Schema
	status, err := p.Status(ctx)
	if err != nil {
		return s, fmt.Errorf("schema: %w", err)
	}
	for _, m := range status {
		s.Latest = max(s.Latest, m.Source.Version)
		if m.State == goose.StatePending {
			s.Pending = append(s.Pending, Migration{Version: m.Source.Version, Name: path.Base(m.Source.Path)})
		}
	}
	// The database's own highest version, which may be one this binary
	// does not embed (a newer binary migrated it).
	if s.Current, err = p.GetDBVersion(ctx); err != nil {
		return s, fmt.Errorf("schema: %w", err)
	}
	var at string
	err = d.QueryRowContext(ctx, `SELECT binary_version, CAST(migrated_at AS TEXT) FROM schema_meta WHERE id = 1`).Scan(&s.MigratedBy, &at)
	if err == nil {
		s.MigratedAt = parseMetaTime(at)
	}
	// A database before migration 00023 has no schema_meta; that is not an
	// error, only unknown.
	return s, nil
}

// parseMetaTime reads schema_meta.migrated_at as either database prints it.
func parseMetaTime(v string) time.Time {
	for _, layout := range []string{"2006-01-02 15:04:05.999999999-07:00", "2006-01-02 15:04:05.999999999-07", time.RFC3339Nano} {
		if t, err := time.Parse(layout, v); err == nil {
			return t.UTC()
		}
	}
	return time.Time{}
}

// CheckNotNewer returns an error wrapping ErrSchemaNewer, naming both
// versions, when the database is ahead of this binary.
func (s Schema) CheckNotNewer() error {
	if !s.Newer() {
		return nil
	}
	by := s.MigratedBy
	if by == "" {
		by = "a newer paperclipai"
	} else {
		by = "paperclipai " + by
	}
	return fmt.Errorf("%w: the database is at migration %d (migrated by %s), this binary (paperclipai %s) knows migrations up to %d; run the newer binary, or restore a backup taken before the upgrade (docs/deployment.md, \"Upgrades\")",
		ErrSchemaNewer, s.Current, by, buildinfo.Version, s.Latest)
}

// Migrate applies the embedded migrations for the database's dialect and
// records this binary's version in schema_meta when it applied any. It
// refuses (ErrSchemaNewer) a database that a newer binary migrated.
func (d *DB) Migrate(ctx context.Context, logger *slog.Logger) error {
	_, err := d.MigrateReport(ctx, logger)
	return err
}

// MigrateReport is Migrate, returning the migrations it applied.
func (d *DB) MigrateReport(ctx context.Context, logger *slog.Logger) ([]Migration, error) {
	p, err := d.provider(true)
	if err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	s, err := d.schema(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	// Checked before Up: goose would apply nothing to a newer database
	// and report success, and this binary would then write rows in a
	// shape the newer schema may no longer accept.
	if err := s.CheckNotNewer(); err != nil {
		return nil, err
	}
	results, err := p.Up(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	var applied []Migration
	for _, r := range results {
		applied = append(applied, Migration{Version: r.Source.Version, Name: path.Base(r.Source.Path)})
		if logger != nil {
			logger.Info("migration applied", "version", r.Source.Version, "duration", r.Duration)
		}
	}
	if len(applied) > 0 || s.MigratedBy == "" {
		if err := d.recordMigration(ctx, s.Latest); err != nil {
			return applied, err
		}
	}
	return applied, nil
}

// recordMigration writes schema_meta's one row.
func (d *DB) recordMigration(ctx context.Context, version int64) error {
	q := `INSERT INTO schema_meta (id, schema_version, binary_version, migrated_at) VALUES (1, $1, $2, $3)
		ON CONFLICT (id) DO UPDATE SET schema_version = excluded.schema_version, binary_version = excluded.binary_version, migrated_at = excluded.migrated_at`
	if _, err := d.ExecContext(ctx, q, version, buildinfo.Version, time.Now().UTC()); err != nil {
		return fmt.Errorf("migrate: record the binary version: %w", err)
	}
	return nil
}

// CheckCurrent returns an error wrapping ErrSchemaNewer or ErrSchemaPending
// unless the database is exactly at this binary's schema; for a server
// that does not migrate by itself (PAPERCLIP_AUTO_MIGRATE=false).
func (d *DB) CheckCurrent(ctx context.Context) error {
	s, err := d.Schema(ctx)
	if err != nil {
		return err
	}
	if err := s.CheckNotNewer(); err != nil {
		return err
	}
	if len(s.Pending) > 0 {
		return fmt.Errorf("%w: %d migration(s) from %d to %d; run `paperclipai admin migrate` (or set PAPERCLIP_AUTO_MIGRATE=true)",
			ErrSchemaPending, len(s.Pending), s.Pending[0].Version, s.Pending[len(s.Pending)-1].Version)
	}
	return nil
}
