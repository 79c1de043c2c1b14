package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/paperclipai/paperclipai/internal/config"
	"github.com/paperclipai/paperclipai/internal/server"
)

// serverFlags registers the contract §2 server flags on cmd.
func serverFlags(cmd *cobra.Command, f *config.Flags) {
	cmd.Flags().StringVar(&f.Listen, "listen", "", "HTTP listen address (env PAPERCLIP_LISTEN, default 127.0.0.1:3100)")
	cmd.Flags().StringVar(&f.Home, "home", "", "data directory (env PAPERCLIP_HOME, default ~/.paperclip)")
	cmd.Flags().StringVar(&f.DatabaseURL, "database-url", "", "empty for embedded SQLite, or postgres://… (env PAPERCLIP_DATABASE_URL)")
	cmd.Flags().StringVar(&f.PublicURL, "public-url", "", "public HTTPS base URL, needed for webhook receiving (env PAPERCLIP_PUBLIC_URL)")
	cmd.Flags().StringVar(&f.DeploymentMode, "deployment-mode", "", "local_trusted or authenticated (env PAPERCLIP_DEPLOYMENT_MODE)")
}

func newRunCmd() *cobra.Command {
	var f config.Flags
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run the control plane: API, web UI, workers and /metrics",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.Load(f, nil)
			if err != nil {
				return err
			}
			return runServer(cmd.Context(), cmd, cfg)
		},
	}
	serverFlags(cmd, &f)
	return cmd
}

// runServer starts the server, prints where it listens and blocks until
// the context ends (SIGINT/SIGTERM), then shuts down gracefully.
func runServer(ctx context.Context, cmd *cobra.Command, cfg config.Config) error {
	srv, err := server.Start(ctx, cfg, server.Options{LogOutput: cmd.ErrOrStderr()})
	if err != nil {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "paperclipai listening on %s (database: %s, home: %s)\n", srv.URL(), srv.DB.Dialect, cfg.Home)
	select {
	case <-ctx.Done():
	case err := <-srv.Done():
		if err != nil {
			return fmt.Errorf("http server: %w", err)
		}
	}
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownGrace+5*time.Second)
	defer cancel()
	return srv.Shutdown(sctx)
}
