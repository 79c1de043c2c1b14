package cli

import (
	"context"
	"net"
	"net/http"
	"os"
	"strings"

	"github.com/spf13/cobra"

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
	c := newAPIClient()
	t := mcpstdio.Target{Endpoint: strings.TrimSuffix(c.base, "/api") + "/mcp", Header: http.Header{},
		Client: &http.Client{}}
	if socket, ok := strings.CutPrefix(os.Getenv("PAPERCLIP_API_URL"), "unix:"); ok {
		t.Client.Transport = &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		}}
	}
	if c.token != "" {
		t.Header.Set("Authorization", "Bearer "+c.token)
		if c.runID != "" {
			t.Header.Set("X-Paperclip-Run-Id", c.runID)
		}
	}
	return t
}
