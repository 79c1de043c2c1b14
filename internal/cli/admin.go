package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/paperclipai/paperclipai/internal/config"
	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/store"
)

// newAdminCmd builds host-side administration that works directly on the
// database (for bootstrapping authenticated mode).
func newAdminCmd() *cobra.Command {
	var f config.Flags
	var email string
	cmd := &cobra.Command{Use: "admin", Short: "Host-side administration (direct database access)"}
	create := &cobra.Command{
		Use:   "create-key --email ADDR",
		Short: "Create an instance administrator (if needed) and print a new board API key for it, once",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if email == "" {
				return fmt.Errorf("--email is required")
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
	create.Flags().StringVar(&email, "email", "", "the administrator's email")
	cmd.AddCommand(create)
	return cmd
}
