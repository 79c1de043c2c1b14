// Package db opens the control plane's database (embedded SQLite or
// PostgreSQL), applies the embedded migrations and provides the small set of
// dialect helpers that the hand-written, portable SQL in package store needs.
package db

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite" // pure-Go SQLite driver, registered as "sqlite"
)

// Dialect names the SQL dialect of an open database.
type Dialect string

const (
	// SQLite is the embedded default database.
	SQLite Dialect = "sqlite"
	// Postgres is PostgreSQL, used when several replicas share the work.
	Postgres Dialect = "postgres"
)

//go:embed migrations
var migrationsFS embed.FS

// DB is an open database with its dialect.
type DB struct {
	*sql.DB
	// Dialect says which SQL dialect the database speaks.
	Dialect Dialect
	// Pool is the native pgx pool behind DB on PostgreSQL (nil on SQLite);
	// LISTEN/NOTIFY needs a dedicated native connection.
	Pool *pgxpool.Pool
	// Path is the database file on SQLite.
	Path string
}

// Querier is the part of *sql.DB and *sql.Tx that store code uses, so one
// function serves inside and outside a transaction.
type Querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

var (
	_ Querier = (*sql.DB)(nil)
	_ Querier = (*sql.Tx)(nil)
	_ Querier = (*DB)(nil)
)

// Open opens the database named by url: empty means the SQLite file at
// sqlitePath, a postgres:// or postgresql:// URL means PostgreSQL.
func Open(ctx context.Context, url, sqlitePath string) (*DB, error) {
	if url == "" {
		return openSQLite(sqlitePath)
	}
	if strings.HasPrefix(url, "postgres://") || strings.HasPrefix(url, "postgresql://") {
		return openPostgres(ctx, url)
	}
	return nil, fmt.Errorf("open database: unsupported database URL scheme (want empty for SQLite or postgres://)")
}

func openSQLite(path string) (*DB, error) {
	if path == "" {
		return nil, errors.New("open sqlite: empty path")
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("open sqlite: create directory: %w", err)
	}
	// WAL lets readers proceed during a write; _txlock=immediate takes the
	// write lock at BEGIN so two transactions never deadlock upgrading a read
	// lock; _time_format=sqlite stores times as "YYYY-MM-DD HH:MM:SS.fff+00:00"
	// text, which sorts correctly because every time we bind is UTC.
	dsn := "file:" + path + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)" +
		"&_pragma=synchronous(NORMAL)&_pragma=foreign_keys(1)&_txlock=immediate&_time_format=sqlite"
	// Connections keep their prepared statements (stmtcache.go).
	sdb := sql.OpenDB(newSQLiteConnector(dsn))
	// One connection: SQLite has one writer, and a single connection turns
	// SQLITE_BUSY retries into orderly queueing in database/sql. The price is
	// that code holding a *sql.Tx must never call the pool, or it waits for
	// itself; store functions therefore take a Querier.
	sdb.SetMaxOpenConns(1)
	sdb.SetMaxIdleConns(1)
	sdb.SetConnMaxLifetime(0)
	if err := sdb.Ping(); err != nil {
		sdb.Close()
		return nil, fmt.Errorf("open sqlite: %w", err)
	}
	return &DB{DB: sdb, Dialect: SQLite, Path: path}, nil
}

func openPostgres(ctx context.Context, url string) (*DB, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("open postgres: parse url: %w", err)
	}
	if cfg.MaxConns < 10 {
		cfg.MaxConns = 10
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := pool.Ping(pctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open postgres: ping: %w", err)
	}
	sdb := stdlib.OpenDBFromPool(pool)
	return &DB{DB: sdb, Dialect: Postgres, Pool: pool}, nil
}

// Close closes the database and, on PostgreSQL, its native pool.
func (d *DB) Close() error {
	err := d.DB.Close()
	if d.Pool != nil {
		d.Pool.Close()
	}
	return err
}

// Tx runs fn inside a transaction and commits it when fn returns nil.
func (d *DB) Tx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := d.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin transaction: %w", err)
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit transaction: %w", err)
	}
	return nil
}

// ForUpdate returns the row-locking suffix for a SELECT inside a transaction:
// "FOR UPDATE" on PostgreSQL; nothing on SQLite, whose single writer
// connection with BEGIN IMMEDIATE already serializes writers.
func (d *DB) ForUpdate() string {
	if d.Dialect == Postgres {
		return " FOR UPDATE"
	}
	return ""
}

// SkipLocked returns "FOR UPDATE SKIP LOCKED" on PostgreSQL, for claiming
// work rows without blocking on another replica's claim; nothing on SQLite.
func (d *DB) SkipLocked() string {
	if d.Dialect == Postgres {
		return " FOR UPDATE SKIP LOCKED"
	}
	return ""
}

// IsUniqueViolation reports whether err is a unique-constraint violation on
// either database.
func IsUniqueViolation(err error) bool {
	if err == nil {
		return false
	}
	msg := err.Error()
	return strings.Contains(msg, "UNIQUE constraint failed") || // SQLite
		strings.Contains(msg, "SQLSTATE 23505") // PostgreSQL unique_violation
}

// IsForeignKeyViolation reports whether err is a foreign-key violation on
// either database.
func IsForeignKeyViolation(err error) bool {
	if err == nil {
		return false
	}
	msg := err.Error()
	return strings.Contains(msg, "FOREIGN KEY constraint failed") || strings.Contains(msg, "SQLSTATE 23503")
}

// AdvisoryXactLock serializes transactions that use the same key until the
// transaction ends: pg_advisory_xact_lock on PostgreSQL; a no-op on SQLite,
// where the single writer connection already serializes every transaction.
func (d *DB) AdvisoryXactLock(ctx context.Context, tx *sql.Tx, key string) error {
	if d.Dialect != Postgres {
		return nil
	}
	if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, key); err != nil {
		return fmt.Errorf("advisory lock: %w", err)
	}
	return nil
}
