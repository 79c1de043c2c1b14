package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/paperclipai/paperclipai/internal/domain"
)

// exitInboxProblem is `email status`'s exit code when an inbox needs
// attention or its setup is incomplete (docs/email-setup.md, "8. Inbox
// health").
const exitInboxProblem = 3

// newEmailStatusCmd builds `paperclipai email status`: the company's
// inboxes with their health, for operators.
func newEmailStatusCmd(companyID func() (string, error)) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Board/operator: the company's inboxes and their health (exit 3 when one needs attention)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cid, err := companyID()
			if err != nil {
				return err
			}
			c := newAPIClient()
			inboxes, err := c.Inboxes(cid).All(cmd.Context(), nil)
			if err != nil {
				return typedFailure(cmd, err)
			}
			if asJSON {
				if err := writeAPIJSON(cmd.OutOrStdout(), inboxes); err != nil {
					return err
				}
			} else {
				printInboxStatus(cmd.OutOrStdout(), inboxes, agentNames(cmd, c, cid))
			}
			for _, ib := range inboxes {
				if ib.Health == domain.HealthAttention || ib.Health == domain.HealthSetupIncomplete {
					return exitError{code: exitInboxProblem}
				}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the inbox summaries as JSON")
	return cmd
}

// agentNames maps the company's agent ids to names (empty when the
// caller cannot list agents).
func agentNames(cmd *cobra.Command, c *apiClient, companyID string) map[string]string {
	names := map[string]string{}
	agents, err := c.Agents(companyID).All(cmd.Context(), nil)
	if err != nil {
		return names
	}
	for _, a := range agents {
		names[a.ID] = a.Name
	}
	return names
}

// writeAPIJSON writes v indented, as the API encodes it (no HTML escaping).
func writeAPIJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// printInboxStatus writes one block per inbox.
func printInboxStatus(w io.Writer, inboxes []domain.EmailEndpointSummary, agents map[string]string) {
	if len(inboxes) == 0 {
		fmt.Fprintln(w, "No email inboxes.")
		return
	}
	when := func(t *time.Time) string {
		if t == nil {
			return "never"
		}
		return t.UTC().Format("2006-01-02 15:04:05Z")
	}
	for i, ib := range inboxes {
		if i > 0 {
			fmt.Fprintln(w)
		}
		addr := "(no address: setup incomplete)"
		if ib.Address != nil {
			addr = *ib.Address
		}
		fmt.Fprintf(w, "%s  %s (%s)\n", addr, ib.Health, ib.HealthCode)
		agent := ib.AssignedAgentID
		if n := agents[agent]; n != "" {
			agent = n + " (" + agent + ")"
		}
		fmt.Fprintf(w, "  inbox:      %s\n", ib.ID)
		fmt.Fprintf(w, "  agent:      %s\n", agent)
		fmt.Fprintf(w, "  status:     %s, %s\n", ib.Status, ib.ReceiveMode)
		fmt.Fprintf(w, "  health:     %s\n", ib.HealthMessage)
		if ib.LastError != nil && *ib.LastError != ib.HealthMessage {
			fmt.Fprintf(w, "  last error: %s\n", *ib.LastError)
		}
		if ib.LastErrorAt != nil {
			fmt.Fprintf(w, "  error at:   %s\n", when(ib.LastErrorAt))
		}
		fmt.Fprintf(w, "  last event: %s\n", when(ib.LastEventAt))
		fmt.Fprintf(w, "  catch-up:   %s\n", when(ib.LastSyncAt))
		if ib.ReceiveMode == domain.ReceiveWebSocket {
			owner := "none"
			if ib.SocketOwner != nil {
				owner = *ib.SocketOwner
			}
			fmt.Fprintf(w, "  socket:     %s\n", owner)
		}
	}
}
