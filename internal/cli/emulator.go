package cli

import "github.com/spf13/cobra"

// newEmulatorCmd is replaced by the AgentMail emulator command.
func newEmulatorCmd() *cobra.Command {
	return &cobra.Command{Use: "emulator", Short: "Standalone AgentMail emulator"}
}
