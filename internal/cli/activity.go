package cli

import (
	"errors"
	"fmt"
	"github.com/paperclipai/paperclipai/internal/config"
	"io"
	"net/url"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
)

// activityExportHelp is the long help of `paperclipai activity export`.
const activityExportHelp = `Export a company's audit log, newest first, as JSON Lines (one entry a
line) or CSV: exactly the entries the filters select, streamed from
GET /api/companies/:companyId/activity/export (docs/api.md). The caller is
a board user (PAPERCLIP_API_KEY, or the local board); PAPERCLIP_API_URL
names the server as for "paperclipai api".

The filters are those of the Activity page and the activity API:
  --action    comma-separated action names (issue.created) or kinds (issue.)
  --actor-kind user, agent or system
  --actor     a user or agent id, or a system actor's name
  --task      a task id or its identifier (ACME-12)
  --since     an RFC 3339 time or a date (inclusive)
  --until     an RFC 3339 time or a date (exclusive; a date includes that day)`

const activityExportExamples = `  paperclipai activity export --company $COMPANY > activity.jsonl
  paperclipai activity export --company $COMPANY --format csv --action email. --since 2026-12-01 --out email.csv
  paperclipai activity export --task ACME-12 --format csv`

func newActivityCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "activity",
		Short: "The audit log: export it as JSON Lines or CSV",
	}
	cmd.AddCommand(newActivityExportCmd())
	return cmd
}

func newActivityExportCmd() *cobra.Command {
	var company, format, action, actorKind, actor, task, since, until, out string
	cmd := &cobra.Command{
		Use:     "export",
		Short:   "Export the filtered audit log (JSON Lines or CSV) to stdout or a file",
		Long:    activityExportHelp,
		Example: activityExportExamples,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if company == "" {
				company = config.LoadClient(nil).CompanyID
			}
			if company == "" {
				return errors.New("no company: set PAPERCLIP_COMPANY_ID or --company")
			}
			if format != "jsonl" && format != "csv" {
				return fmt.Errorf("--format must be jsonl or csv, not %q", format)
			}
			q := url.Values{"format": {format}}
			for name, v := range map[string]string{"action": action, "actorKind": actorKind, "actor": actor,
				"taskId": task, "since": since, "until": until} {
				if v != "" {
					q.Set(name, v)
				}
			}
			path := "/companies/" + url.PathEscape(company) + "/activity/export?" + q.Encode()
			w := cmd.OutOrStdout()
			if out != "" && out != "-" {
				// Written next to the target and renamed once complete, so
				// a refused or cut-short export never leaves a partial file
				// under the asked name.
				f, err := os.CreateTemp(filepath.Dir(out), ".activity-export-*")
				if err != nil {
					return fmt.Errorf("activity export: %w", err)
				}
				defer os.Remove(f.Name())
				defer f.Close()
				if err := newAPIClient().download(cmd, path, f); err != nil {
					return err
				}
				if err := f.Close(); err != nil {
					return fmt.Errorf("activity export: %w", err)
				}
				if err := os.Rename(f.Name(), out); err != nil {
					return fmt.Errorf("activity export: %w", err)
				}
				return nil
			}
			return newAPIClient().download(cmd, path, w)
		},
	}
	f := cmd.Flags()
	f.StringVar(&company, "company", "", "company id (default $PAPERCLIP_COMPANY_ID)")
	f.StringVar(&format, "format", "jsonl", "jsonl or csv")
	f.StringVar(&action, "action", "", "action names or kinds, comma-separated (issue.created,email.)")
	f.StringVar(&actorKind, "actor-kind", "", "user, agent or system")
	f.StringVar(&actor, "actor", "", "a user or agent id, or a system actor's name")
	f.StringVar(&task, "task", "", "a task id or identifier (ACME-12)")
	f.StringVar(&since, "since", "", "from this time or date (inclusive)")
	f.StringVar(&until, "until", "", "before this time, or up to and including this date")
	f.StringVar(&out, "out", "", "write to this file instead of stdout")
	return cmd
}

// download GETs path and copies a successful answer's body to w as it
// arrives (an export can be larger than any answer the other commands
// read into memory); a refused request prints the server's error as
// call does.
func (c *apiClient) download(cmd *cobra.Command, path string, w io.Writer) error {
	resp, err := c.Stream(cmd.Context(), path, w)
	if err != nil {
		return fmt.Errorf("activity export: %w", err)
	}
	if resp.Status >= 400 {
		return apiFailure(cmd, resp.Status, resp.Header, resp.Body)
	}
	return nil
}
