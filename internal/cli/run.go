package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/paperclipai/paperclipai/internal/config"
	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/demo"
	"github.com/paperclipai/paperclipai/internal/sdnotify"
	"github.com/paperclipai/paperclipai/internal/server"
)

// serverFlags registers the server flags (README.md, "Configuration") on cmd.
func serverFlags(cmd *cobra.Command, f *config.Flags) {
	cmd.Flags().StringVar(&f.Listen, "listen", "", "HTTP listen address (env PAPERCLIP_LISTEN, default 127.0.0.1:3100)")
	cmd.Flags().StringVar(&f.Home, "home", "", "data directory (env PAPERCLIP_HOME, default ~/.paperclip)")
	cmd.Flags().StringVar(&f.DatabaseURL, "database-url", "", "empty for embedded SQLite, or postgres://… (env PAPERCLIP_DATABASE_URL)")
	cmd.Flags().StringVar(&f.PublicURL, "public-url", "", "public HTTPS base URL, needed for webhook receiving (env PAPERCLIP_PUBLIC_URL)")
	cmd.Flags().StringVar(&f.DeploymentMode, "deployment-mode", "", "local_trusted or authenticated (env PAPERCLIP_DEPLOYMENT_MODE)")
	cmd.Flags().BoolVar(&f.InsecureLocalWebhooks, "insecure-local-webhooks", false,
		"allow webhook receiving on a plain-HTTP loopback --public-url such as http://127.0.0.1:3100, for trying webhooks with the local emulator; refused off loopback (env PAPERCLIP_INSECURE_LOCAL_WEBHOOKS=1)")
}

func newRunCmd() *cobra.Command {
	var f config.Flags
	var demoMode bool
	var demoListen, demoSMTP, demoAgent string
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run the control plane: API, web UI, workers and /metrics",
		Long: `Run the control plane: the JSON API under /api, the web UI, MCP at /mcp, the
email and heartbeat workers and /metrics, until SIGINT or SIGTERM.

With --demo it also runs an AgentMail emulator (its mailboxes are kept in
the home) and seeds the company "Demo Co" whose agent answers email; the
banner says how to send it a first email. Other settings come from the
environment (README.md, "Configuration").`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.Load(f, nil)
			if err != nil {
				return err
			}
			if demoMode {
				err = runDemo(cmd.Context(), cmd, cfg, demoListen, demoSMTP, demoAgent)
			} else {
				err = runServer(cmd.Context(), cmd, cfg)
			}
			return schemaExit(cmd, err)
		},
	}
	serverFlags(cmd, &f)
	cmd.Flags().BoolVar(&demoMode, "demo", false, "also run an in-process AgentMail emulator and a demo company whose agent answers email")
	cmd.Flags().StringVar(&demoAgent, "agent", "example", "demo: the agent that answers: example (built in), claude_local (Claude Code) or codex_local (Codex); a CLI agent needs the CLI on PATH and its credentials in the environment")
	cmd.Flags().StringVar(&demoListen, "demo-emulator-listen", "127.0.0.1:3199", "demo: the emulator's REST, WebSocket and control API address")
	cmd.Flags().StringVar(&demoSMTP, "demo-smtp", "127.0.0.1:2525", "demo: the emulator's SMTP address for inbound mail")
	return cmd
}

// runDemo starts the emulator, points the server at it, seeds the demo
// company and serves until the context ends.
func runDemo(ctx context.Context, cmd *cobra.Command, cfg config.Config, listen, smtp, agent string) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	ag := demo.ExampleAgent(exe)
	if agent != "" && agent != "example" {
		// Checked before anything starts: a missing CLI or credential is
		// said at once, not discovered by the first email's failed run.
		if ag, err = demo.CLIAgent(agent, os.LookupEnv); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(filepath.Join(cfg.Home, "instance"), 0o700); err != nil {
		return err
	}
	em, err := demo.StartEmulator(ctx, cfg.Home, listen, smtp)
	if err != nil {
		return fmt.Errorf("start the demo emulator: %w", err)
	}
	defer em.Close()
	cfg.AgentMailAPIURL, cfg.AgentMailWSURL = em.APIURL(), em.WebSocketURL()
	srv, err := server.Start(ctx, cfg, server.Options{LogOutput: cmd.ErrOrStderr()})
	if err != nil {
		return err
	}
	seeded, err := demo.Seed(ctx, srv, em, ag)
	if err != nil {
		sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownGrace)
		defer cancel()
		_ = srv.Shutdown(sctx)
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "paperclipai listening on %s (database: %s, home: %s)\n", srv.URL(), srv.DB.Dialect, cfg.Home)
	fmt.Fprint(cmd.OutOrStdout(), demo.Instructions(srv, em, seeded))
	return waitAndShutdown(ctx, srv, cfg)
}

// runServer starts the server, prints where it listens and blocks until
// the context ends (SIGINT/SIGTERM), then shuts down gracefully.
func runServer(ctx context.Context, cmd *cobra.Command, cfg config.Config) error {
	srv, err := server.Start(ctx, cfg, server.Options{LogOutput: cmd.ErrOrStderr()})
	if err != nil {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "paperclipai listening on %s (database: %s, home: %s)\n", srv.URL(), srv.DB.Dialect, cfg.Home)
	if a := srv.MetricsAddr(); a != "" {
		fmt.Fprintf(cmd.OutOrStdout(), "metrics and probes on http://%s (/metrics, /healthz, /readyz)\n", a)
	}
	return waitAndShutdown(ctx, srv, cfg)
}

// schemaExit turns a schema the binary cannot serve into its documented
// exit code (docs/deployment.md, "Upgrades"), printing the reason.
func schemaExit(cmd *cobra.Command, err error) error {
	switch {
	case errors.Is(err, db.ErrSchemaNewer):
		fmt.Fprintln(cmd.ErrOrStderr(), "error:", err)
		return exitError{code: db.ExitSchemaNewer}
	case errors.Is(err, db.ErrSchemaPending):
		fmt.Fprintln(cmd.ErrOrStderr(), "error:", err)
		return exitError{code: db.ExitSchemaPending}
	}
	return err
}

// waitAndShutdown blocks until ctx ends or the HTTP server stops, then
// shuts the server down gracefully.
//
// Under systemd (Type=notify) it is the service's main loop: it says
// READY=1 once the server serves (migrations applied, listeners bound),
// WATCHDOG=1 every half WatchdogSec while the database answers, and
// STOPPING=1 when the drain begins.
func waitAndShutdown(ctx context.Context, srv *server.Server, cfg config.Config) error {
	notify := func(states ...string) {
		if err := sdnotify.Send(cfg.NotifySocket, states...); err != nil {
			srv.Logger.Warn("systemd notification", "err", err)
		}
	}
	notify(sdnotify.Ready, sdnotify.Status("serving on "+srv.Addr()))
	var tick <-chan time.Time
	if cfg.WatchdogInterval > 0 {
		t := time.NewTicker(cfg.WatchdogInterval / 2)
		defer t.Stop()
		tick = t.C
	}
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case err := <-srv.Done():
			if err != nil {
				return fmt.Errorf("http server: %w", err)
			}
			break loop
		case <-tick:
			// A wedged database means a wedged server: let systemd's
			// watchdog restart it rather than feed it regardless.
			if srv.Alive(ctx, cfg.WatchdogInterval/4) {
				notify(sdnotify.Watchdog)
			}
		}
	}
	notify(sdnotify.Stopping, sdnotify.Status("draining"))
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownGrace+5*time.Second)
	defer cancel()
	// A drain that had to cancel runs at the end of the grace period is
	// still an orderly stop (the runs are recorded as cancelled and
	// retried): exit 0, so systemd does not count a failure.
	if err := srv.Shutdown(sctx); err != nil {
		srv.Logger.Warn("shutdown incomplete", "err", err)
	}
	return nil
}
