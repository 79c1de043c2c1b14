package cli

import (
	"context"
	"net"
	"net/http"
	"strings"

	"github.com/spf13/cobra"

	"github.com/paperclipai/paperclipai/internal/config"
	"github.com/paperclipai/paperclipai/internal/mcpstdio"
)

func newMCPCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "mcp", Short: "Reach the Paperclip MCP tools from an agent run"}
	cmd.AddCommand(&cobra.Command{
		Use:   "stdio",
		Short: "Serve the run's MCP tools on stdin/stdout (for stdio-only MCP clients and sandboxed runs)",
		Long: "Forwards MCP messages (one JSON-RPC message per line) between stdin/stdout and the server's /mcp endpoint,\n" +
			"as the run in PAPERCLIP_API_URL, PAPERCLIP_API_KEY and PAPERCLIP_RUN_ID. Inside a sandbox PAPERCLIP_API_URL is\n" +
			"the run's bridge socket (unix:…), which adds the run's credentials itself.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return mcpstdio.Run(cmd.Context(), cmd.InOrStdin(), cmd.OutOrStdout(), mcpTarget())
		},
	})
	return cmd
}

// mcpTarget derives the /mcp endpoint and credentials from the run
// environment, the same way the API client does.
func mcpTarget() mcpstdio.Target {
	env := config.LoadClient(nil)
	t := mcpstdio.Target{Endpoint: strings.TrimSuffix(env.APIBase(), "/api") + "/mcp", Header: http.Header{},
		Client: &http.Client{}}
	if socket, ok := env.Socket(); ok {
		t.Endpoint = "http://paperclip/mcp"
		t.Client.Transport = &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		}}
	}
	if env.APIKey != "" {
		t.Header.Set("Authorization", "Bearer "+env.APIKey)
		if env.RunID != "" {
			t.Header.Set("X-Paperclip-Run-Id", env.RunID)
		}
	}
	return t
}
