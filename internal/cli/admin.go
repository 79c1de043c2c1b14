package cli

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/mail"
	"os"
	"path/filepath"
	"slices"

	"github.com/spf13/cobra"

	"github.com/paperclipai/paperclipai/internal/config"
	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/store"
)

// newAdminCmd builds host-side administration that works directly on the
// database (for bootstrapping authenticated mode).
func newAdminCmd() *cobra.Command {
	var f config.Flags
	var email, companyID, role string
	cmd := &cobra.Command{Use: "admin", Short: "Host-side administration (direct database access)"}
	create := &cobra.Command{
		Use:   "create-key --email ADDR [--company ID [--role ROLE]]",
		Short: "Print a new board API key, once: for an instance administrator, or with --company for a member of that company",
		Long: `Without --company: create an instance administrator (if needed) and print an
unscoped board API key for it (bootstraps authenticated mode).
With --company: create the user (if needed, never an instance administrator),
make it a member of the company with --role (default member; an existing
membership keeps its role unless --role is given) and print a key scoped to
that company.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if a, err := mail.ParseAddress(email); err != nil || a.Address != email {
				return fmt.Errorf("--email must be a bare email address (got %q)", email)
			}
			if role != "" && companyID == "" {
				return fmt.Errorf("--role needs --company")
			}
			if companyID != "" && !store.ValidID(companyID) {
				return fmt.Errorf("--company must be a company id (a UUID)")
			}
			if role != "" && !slices.Contains([]string{domain.RoleOwner, domain.RoleAdmin, domain.RoleMember, domain.RoleViewer}, role) {
				return fmt.Errorf("--role must be one of owner, admin, member, viewer")
			}
			cfg, err := config.Load(f, nil)
			if err != nil {
				return err
			}
			if err := os.MkdirAll(filepath.Join(cfg.Home, "instance"), 0o700); err != nil {
				return err
			}
			ctx := cmd.Context()
			d, err := db.Open(ctx, cfg.DatabaseURL, cfg.SQLitePath())
			if err != nil {
				return err
			}
			defer d.Close()
			if err := d.Migrate(ctx, nil); err != nil {
				return err
			}
			st := store.New(d)
			if companyID != "" {
				token, what, err := memberKey(ctx, st, email, companyID, role)
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s\n", token)
				fmt.Fprintf(cmd.ErrOrStderr(), "board API key for %s (shown once; send it as Authorization: Bearer …)\n", what)
				return nil
			}
			u, err := st.EnsureUser(ctx, d, email, "", true)
			if err != nil {
				return err
			}
			if !u.IsInstanceAdmin {
				if err := st.SetInstanceAdmin(context.WithoutCancel(ctx), d, u.ID); err != nil {
					return err
				}
			}
			_, token, err := st.CreateBoardKey(ctx, d, u.ID, "", "admin create-key")
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s\n", token)
			fmt.Fprintf(cmd.ErrOrStderr(), "board API key for instance administrator %s (shown once; send it as Authorization: Bearer …)\n", u.Email)
			return nil
		},
	}
	serverFlags(create, &f)
	create.Flags().StringVar(&email, "email", "", "the user's email")
	create.Flags().StringVar(&companyID, "company", "", "issue a key scoped to this company, for a member (not an administrator)")
	create.Flags().StringVar(&role, "role", "", "with --company: the member's role (owner, admin, member, viewer; default member)")
	cmd.AddCommand(create, newBackupCmd(), newMigrateCmd(), newRestoreCmd(), newPurgeSenderCmd())
	return cmd
}

func newBackupCmd() *cobra.Command {
	var f config.Flags
	var out string
	cmd := &cobra.Command{
		Use:   "backup --out FILE",
		Short: "Copy the SQLite database to FILE while the server runs (PostgreSQL: use pg_dump)",
		Long: `Write a consistent, compacted copy of the embedded SQLite database to FILE
(which must not exist; it is created 0600) and check it. The server may keep
running. The copy is useless without the vault master key
($PAPERCLIP_HOME/instance/secrets/master.key or PAPERCLIP_SECRETS_MASTER_KEY):
back the key up too, but keep it apart from the database copies.
On PostgreSQL, back up with pg_dump instead (docs/deployment.md).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return errors.New("--out FILE is required")
			}
			cfg, err := config.Load(f, nil)
			if err != nil {
				return err
			}
			if cfg.DatabaseURL != "" {
				return fmt.Errorf("%w: pg_dump --format=custom --file=paperclip.dump \"$PAPERCLIP_DATABASE_URL\" (docs/deployment.md)", db.ErrBackupNotSQLite)
			}
			if _, err := os.Stat(cfg.SQLitePath()); err != nil {
				return fmt.Errorf("no database to back up at %s (check --home): %w", cfg.SQLitePath(), err)
			}
			d, err := db.Open(cmd.Context(), "", cfg.SQLitePath())
			if err != nil {
				return err
			}
			defer d.Close()
			if err := d.BackupSQLite(cmd.Context(), out); err != nil {
				return err
			}
			info, err := os.Stat(out)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "backed up %s to %s (%d bytes)\n", cfg.SQLitePath(), out, info.Size())
			if cfg.MasterKeyB64 == "" {
				fmt.Fprintf(cmd.ErrOrStderr(), "keep a copy of the vault master key %s too, stored apart from this backup\n", cfg.MasterKeyFile)
			}
			return nil
		},
	}
	serverFlags(cmd, &f)
	cmd.Flags().StringVar(&out, "out", "", "the backup file to create (must not exist)")
	return cmd
}

// memberKey makes email a member of companyID (role, or member for a new
// membership) and mints a key scoped to the company, in one transaction.
func memberKey(ctx context.Context, st *store.Store, email, companyID, role string) (token, what string, err error) {
	err = st.Tx(ctx, func(tx *sql.Tx) error {
		c, err := st.GetCompany(ctx, tx, companyID)
		if err != nil {
			return fmt.Errorf("company %s: %w", companyID, err)
		}
		u, err := st.EnsureUser(ctx, tx, email, "", false)
		if err != nil {
			return err
		}
		cur, err := st.LockMemberships(ctx, tx, companyID, u.ID, role)
		switch {
		case errors.Is(err, store.ErrNotFound):
			if role == "" {
				role = domain.RoleMember
			}
			if _, err := st.PutMembership(ctx, tx, companyID, u.ID, role, nil); err != nil {
				return err
			}
		case err != nil:
			return err // the last owner keeps the role
		case role != "" && role != cur.Role:
			if _, err := st.PutMembership(ctx, tx, companyID, u.ID, role, cur.Permissions); err != nil {
				return err
			}
		default:
			role = cur.Role
		}
		if _, token, err = st.CreateBoardKey(ctx, tx, u.ID, companyID, "admin create-key"); err != nil {
			return err
		}
		what = fmt.Sprintf("%s, %s of %q", u.Email, role, c.Name)
		return nil
	})
	return token, what, err
}
