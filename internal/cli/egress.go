package cli

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/paperclipai/paperclipai/internal/sandbox"
)

// newEgressExecCmd is the wrapper of sandboxed CLI agents: a sandbox has
// no network, so it forwards a port on the sandbox's own loopback to the
// run's egress proxy socket and starts the command with HTTPS_PROXY set to
// it. The proxy admits only the provider's hosts.
func newEgressExecCmd() *cobra.Command {
	var socket string
	cmd := &cobra.Command{
		Use:    "egress-exec --socket PATH -- COMMAND [ARG...]",
		Short:  "Run a command whose HTTPS traffic goes through a sandbox run's egress proxy (used inside sandboxes)",
		Hidden: true,
		Args:   cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := context.WithCancel(cmd.Context())
			defer cancel()
			addr, err := sandbox.ForwardEgress(ctx, socket)
			if err != nil {
				return err
			}
			proxy := "http://" + addr
			child := exec.Command(args[0], args[1:]...)
			child.Env = append(os.Environ(), "HTTPS_PROXY="+proxy, "https_proxy="+proxy, "HTTP_PROXY="+proxy, "http_proxy="+proxy,
				"NO_PROXY=localhost,127.0.0.1,::1", "no_proxy=localhost,127.0.0.1,::1")
			child.Stdin, child.Stdout, child.Stderr = cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr()
			if err := child.Start(); err != nil {
				return err
			}
			sigs := make(chan os.Signal, 4)
			signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
			defer signal.Stop(sigs)
			go func() {
				for s := range sigs {
					_ = child.Process.Signal(s)
				}
			}()
			err = child.Wait()
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code := ee.ExitCode()
				if code < 0 {
					code = 128 + int(syscall.SIGKILL)
				}
				return exitError{code: code}
			}
			return err
		},
	}
	cmd.Flags().StringVar(&socket, "socket", sandbox.EgressSocket, "the egress proxy's unix socket")
	return cmd
}
