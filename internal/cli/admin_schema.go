package cli

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/paperclipai/paperclipai/internal/config"
	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/retention"
	"github.com/paperclipai/paperclipai/internal/server"
	"github.com/paperclipai/paperclipai/internal/store"
)

// newMigrateCmd builds `admin migrate`: list or apply pending migrations
// explicitly (for PAPERCLIP_AUTO_MIGRATE=false and upgrade planning).
func newMigrateCmd() *cobra.Command {
	var f config.Flags
	var dryRun, asJSON bool
	cmd := &cobra.Command{
		Use:   "migrate [--dry-run] [--json]",
		Short: "Apply pending database migrations, or with --dry-run list them",
		Long: `Show the database's schema version, which binary last migrated it, and the
migrations this binary would apply; without --dry-run apply them (under the
same PostgreSQL advisory lock as a starting server). A database migrated by
a newer binary is refused with exit code 3 (docs/deployment.md, "Upgrades").`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.Load(f, nil)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			if cfg.DatabaseURL == "" {
				if err := os.MkdirAll(filepath.Dir(cfg.SQLitePath()), 0o700); err != nil {
					return err
				}
			}
			d, err := db.Open(ctx, cfg.DatabaseURL, cfg.SQLitePath())
			if err != nil {
				return err
			}
			defer d.Close()
			s, err := d.Schema(ctx)
			if err != nil {
				return err
			}
			if err := s.CheckNotNewer(); err != nil {
				return schemaExit(cmd, err)
			}
			out := cmd.OutOrStdout()
			if dryRun {
				if asJSON {
					return writeJSON(out, s)
				}
				printSchema(out, s)
				for _, m := range s.Pending {
					fmt.Fprintf(out, "pending: %05d %s\n", m.Version, m.Name)
				}
				if len(s.Pending) == 0 {
					fmt.Fprintln(out, "no pending migrations")
				}
				return nil
			}
			applied, err := d.MigrateReport(ctx, nil)
			if err != nil {
				return schemaExit(cmd, err)
			}
			if asJSON {
				return writeJSON(out, map[string]any{"applied": applied})
			}
			for _, m := range applied {
				fmt.Fprintf(out, "applied: %05d %s\n", m.Version, m.Name)
			}
			if len(applied) == 0 {
				fmt.Fprintln(out, "no pending migrations")
			}
			return nil
		},
	}
	serverFlags(cmd, &f)
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "list the pending migrations without applying them")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func printSchema(w io.Writer, s db.Schema) {
	by := "unknown binary"
	if s.MigratedBy != "" {
		by = "paperclipai " + s.MigratedBy + " at " + s.MigratedAt.Format(time.RFC3339)
	}
	fmt.Fprintf(w, "schema: database at %d (last migrated by %s); this binary knows up to %d\n", s.Current, by, s.Latest)
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// newRestoreCmd builds `admin restore BACKUP`: put a SQLite backup (from
// `admin backup`) in place of the home's database, with the server stopped.
func newRestoreCmd() *cobra.Command {
	var f config.Flags
	cmd := &cobra.Command{
		Use:   "restore BACKUP",
		Short: "Replace the SQLite database with a backup (the server must be stopped; PostgreSQL: pg_restore)",
		Long: `Check BACKUP (a file written by 'paperclipai admin backup') and put it in
place of the home's SQLite database. Refused while a server runs on the home
(it holds the home's lock). The database it replaces is kept beside it as
paperclip.db.before-restore-<time>. The vault master key must be the one of
the backup's instance. On PostgreSQL restore a pg_dump with pg_restore
instead (docs/deployment.md, "Backup and restore").`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := config.Load(f, nil)
			if err != nil {
				return err
			}
			if cfg.DatabaseURL != "" {
				return errors.New("admin restore is for SQLite; restore PostgreSQL with pg_restore into an empty database (docs/deployment.md)")
			}
			if err := os.MkdirAll(filepath.Dir(cfg.SQLitePath()), 0o700); err != nil {
				return err
			}
			// The home's lock is what a running server holds: taking it
			// proves none runs, and keeps one from starting meanwhile.
			lock, err := server.LockHome(cfg.Home)
			if errors.Is(err, server.ErrHomeLocked) {
				return fmt.Errorf("refusing to restore: a paperclipai server is running on %s; stop it first (systemctl stop paperclip)", cfg.Home)
			}
			if err != nil {
				return err
			}
			defer lock.Close()
			kept, err := restoreSQLite(cmd, args[0], cfg.SQLitePath())
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "restored %s from %s\n", cfg.SQLitePath(), args[0])
			if kept != "" {
				fmt.Fprintf(cmd.OutOrStdout(), "the replaced database is kept at %s\n", kept)
			}
			return nil
		},
	}
	serverFlags(cmd, &f)
	return cmd
}

// restoreSQLite checks backup and copies it over dst (through a temporary
// file and a rename, so a failure leaves dst as it was); the old dst and
// its WAL are moved aside, and that path is returned.
func restoreSQLite(cmd *cobra.Command, backup, dst string) (string, error) {
	ctx := cmd.Context()
	c, err := sql.Open("sqlite", "file:"+backup+"?mode=ro")
	if err != nil {
		return "", fmt.Errorf("open the backup: %w", err)
	}
	var res string
	err = c.QueryRowContext(ctx, `PRAGMA quick_check`).Scan(&res)
	c.Close()
	if err != nil || res != "ok" {
		return "", fmt.Errorf("the backup %s is not a sound SQLite database (%s, %v)", backup, res, err)
	}
	tmp := dst + ".restoring"
	if err := copyFileMode(backup, tmp, 0o600); err != nil {
		return "", fmt.Errorf("copy the backup: %w", err)
	}
	kept := ""
	if _, err := os.Stat(dst); err == nil {
		kept = dst + ".before-restore-" + time.Now().UTC().Format("20060102-150405")
		if err := os.Rename(dst, kept); err != nil {
			os.Remove(tmp)
			return "", fmt.Errorf("move the current database aside: %w", err)
		}
	}
	// The old WAL belongs to the old database: replayed onto the backup
	// it would corrupt it.
	for _, ext := range []string{"-wal", "-shm"} {
		if _, err := os.Stat(dst + ext); err == nil {
			if kept != "" {
				_ = os.Rename(dst+ext, kept+ext)
			} else {
				_ = os.Remove(dst + ext)
			}
		}
	}
	if err := os.Rename(tmp, dst); err != nil {
		return kept, fmt.Errorf("put the backup in place: %w", err)
	}
	return kept, nil
}

func copyFileMode(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// newPurgeSenderCmd builds `admin purge-sender ADDRESS`: remove the retained
// email content from and to one address (a data-subject request).
func newPurgeSenderCmd() *cobra.Command {
	var f config.Flags
	var requestedBy string
	cmd := &cobra.Command{
		Use:   "purge-sender ADDRESS [--requested-by WHO]",
		Short: "Delete the retained email content from and to one address, in every company (audited)",
		Long: `For a data-subject request: remove the content of every retained message
from or to ADDRESS (From, To, Cc, Bcc, Reply-To), in every company: its text,
headers, attachments, subject and display names, the body of the task
comment an inbound one became, the provider event it came from and the
search index's copy; its conversation's subject, and the title of the task
made from it (now "Email (purged)"). Also the text and subject of finished
sends to ADDRESS, and the subject and text of messages from it held in the
quarantine. Tasks, comment rows and the message rows (addresses, times,
thread) stay. Each company concerned gets an audit line
"retention.purged_sender" with --requested-by and a SHA-256 of the address
(not the address itself).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if requestedBy == "" {
				return errors.New("--requested-by is required (who asked, for the audit line)")
			}
			cfg, err := config.Load(f, nil)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			d, err := db.Open(ctx, cfg.DatabaseURL, cfg.SQLitePath())
			if err != nil {
				return err
			}
			defer d.Close()
			if err := d.CheckCurrent(ctx); err != nil {
				return schemaExit(cmd, err)
			}
			svc := &retention.Service{Store: store.New(d), WorkspacesDir: cfg.WorkspacesDir()}
			got, err := svc.PurgeSender(ctx, args[0], requestedBy)
			for company, r := range got {
				fmt.Fprintf(cmd.OutOrStdout(), "company %s: %d message(s), %d bytes of text; %d attachment(s), %d bytes; %d subject(s); %d send(s), %d quarantined message(s)\n",
					company, r.EmailMessages, r.EmailBytes, r.Attachments, r.AttachmentBytes, r.Subjects, r.Sends, r.Quarantined)
			}
			if err != nil {
				return err
			}
			if len(got) == 0 {
				fmt.Fprintln(cmd.OutOrStdout(), "no retained email from or to that address")
			}
			return nil
		},
	}
	serverFlags(cmd, &f)
	cmd.Flags().StringVar(&requestedBy, "requested-by", "", "who asked for the deletion (recorded in the audit line)")
	return cmd
}
