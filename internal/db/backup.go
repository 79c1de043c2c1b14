package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
)

// ErrBackupNotSQLite is returned by BackupSQLite on PostgreSQL, whose
// backups are pg_dump's job.
var ErrBackupNotSQLite = errors.New("online backup here is for SQLite; back up PostgreSQL with pg_dump")

// BackupSQLite writes a consistent copy of the SQLite database to path
// while the server may keep running, and checks the copy. path must not
// exist; it is created readable by the owner only.
func (d *DB) BackupSQLite(ctx context.Context, path string) error {
	if d.Dialect != SQLite {
		return ErrBackupNotSQLite
	}
	// VACUUM INTO reads the database in one read transaction, so the copy
	// is a consistent snapshot even while other processes write (WAL lets
	// them go on), and it compacts the copy. It writes into an empty file,
	// which lets us create that file first with O_EXCL and mode 0600: the
	// copy holds the vaulted (encrypted) secrets and every record.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	f.Close()
	ok := false
	defer func() {
		if !ok {
			_ = os.Remove(path)
		}
	}()
	if _, err := d.ExecContext(ctx, `VACUUM INTO ?`, path); err != nil {
		return fmt.Errorf("backup: vacuum into %s: %w", path, err)
	}
	c, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		return fmt.Errorf("backup: check the copy: %w", err)
	}
	defer c.Close()
	var res string
	if err := c.QueryRowContext(ctx, `PRAGMA quick_check`).Scan(&res); err != nil || res != "ok" {
		return fmt.Errorf("backup: the copy failed its integrity check (%s, %v)", res, err)
	}
	ok = true
	return nil
}
