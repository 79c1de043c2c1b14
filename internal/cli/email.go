package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"

	"github.com/spf13/cobra"

	"github.com/paperclipai/paperclipai/internal/config"
)

// newEmailCmd builds the agent-facing email commands. They call the same
// authenticated API as any client, inheriting the run token and run id from
// the agent environment (PAPERCLIP_API_KEY, PAPERCLIP_RUN_ID).
func newEmailCmd() *cobra.Command {
	var company string
	cmd := &cobra.Command{
		Use:   "email",
		Short: "Agent email actions (inboxes, thread, send, reply, delivery) and operators' inbox status",
	}
	cmd.PersistentFlags().StringVar(&company, "company", "", "company id (default $PAPERCLIP_COMPANY_ID)")
	companyID := func() (string, error) {
		if company != "" {
			return company, nil
		}
		if v := config.LoadClient(nil).CompanyID; v != "" {
			return v, nil
		}
		return "", errors.New("no company: set PAPERCLIP_COMPANY_ID or --company")
	}
	get := func(path func(cid string, args []string) string) func(*cobra.Command, []string) error {
		return func(cmd *cobra.Command, args []string) error {
			cid, err := companyID()
			if err != nil {
				return err
			}
			return newAPIClient().call(cmd, "GET", path(cid, args), nil)
		}
	}
	send := func(wantReply bool) func(*cobra.Command, []string) error {
		return func(cmd *cobra.Command, _ []string) error {
			file, _ := cmd.Flags().GetString("file")
			if file == "" {
				return errors.New("--file is required (a JSON request, or - for stdin)")
			}
			if file != "-" {
				file = "@" + file
			}
			body, err := readData(cmd, file)
			if err != nil {
				return fmt.Errorf("read request: %w", err)
			}
			var probe map[string]any
			if err := json.Unmarshal(body, &probe); err != nil {
				return fmt.Errorf("request is not a JSON object: %w", err)
			}
			_, isReply := probe["conversationId"]
			if isReply != wantReply {
				if wantReply {
					return errors.New("a reply needs conversationId and replyToMessageId (use `email send` for a new conversation)")
				}
				return errors.New("a new email has no conversationId (use `email reply` to answer a thread)")
			}
			cid, err := companyID()
			if err != nil {
				return err
			}
			return newAPIClient().call(cmd, "POST", "/companies/"+cid+"/email/send", body)
		}
	}
	// The inbox list is paged (docs/api.md, "Paging"): every page is read
	// and printed as one array, so no inbox is left out.
	inboxes := &cobra.Command{Use: "inboxes", Short: "The caller's active assigned inboxes (every page)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cid, err := companyID()
			if err != nil {
				return err
			}
			return newAPIClient().callAll(cmd, "/companies/"+url.PathEscape(cid)+"/email/inboxes?limit=200", "")
		}}
	thread := &cobra.Command{Use: "thread <taskId>", Short: "The email thread bound to a task (JSON, or null)", Args: cobra.ExactArgs(1),
		RunE: get(func(cid string, a []string) string { return "/companies/" + cid + "/email/tasks/" + a[0] })}
	delivery := &cobra.Command{Use: "delivery <sendId>", Short: "A send's outcome (sendId: the id the send returned, also called publicationId): queued, sent, delivered, failed, uncertain, awaiting_review (a person will review it: do not send it again), rejected or expired", Args: cobra.ExactArgs(1),
		RunE: get(func(cid string, a []string) string { return "/companies/" + cid + "/email/deliveries/" + a[0] })}
	sendCmd := &cobra.Command{Use: "send --file F", Short: "Start a new email conversation (F = JSON request, - = stdin)", Args: cobra.NoArgs, RunE: send(false)}
	replyCmd := &cobra.Command{Use: "reply --file F", Short: "Reply in a bound conversation (F = JSON request, - = stdin)", Args: cobra.NoArgs, RunE: send(true)}
	for _, c := range []*cobra.Command{sendCmd, replyCmd} {
		c.Flags().String("file", "", "JSON request file, or - for stdin")
	}
	cmd.AddCommand(inboxes, thread, sendCmd, replyCmd, delivery, newEmailStatusCmd(companyID), newQualifyCmd())
	return cmd
}
