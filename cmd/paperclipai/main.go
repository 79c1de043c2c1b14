// Command paperclipai is the Paperclip control plane, its CLI and the AgentMail emulator in one binary.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/paperclipai/paperclipai/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
