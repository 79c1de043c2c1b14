package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/paperclipai/paperclipai/internal/agentmail"
	"github.com/paperclipai/paperclipai/internal/config"
	"github.com/paperclipai/paperclipai/internal/qualify"
)

// newQualifyCmd builds "paperclipai email qualify": the live-qualification
// checklist against a running server (docs/qualification.md).
func newQualifyCmd() *cobra.Command {
	var (
		o                   qualify.Options
		keyFile, reportFile string
		modes               string
		asJSON              bool
	)
	cmd := &cobra.Command{
		Use:   "qualify --recipient ADDR [--api-key-file FILE]",
		Short: "Run the email live-qualification checklist against a running server",
		Long: "Connect an inbox through the setup API, receive mail (one task, one wake), send an explicit\n" +
			"reply and check provider threading and delivery, disconnect and reconnect, interrupt receiving and\n" +
			"check the catch-up, then remove what was created. The AgentMail key is read from --api-key-file\n" +
			"(- for stdin) or asked for without echo; it is never a flag value and never in the report.\n" +
			"Board authority comes from PAPERCLIP_API_KEY (a board key), or the local board. See docs/qualification.md.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			env := config.LoadClient(nil)
			key, err := readAgentMailKey(cmd, keyFile)
			if err != nil {
				return err
			}
			o.APIKey = key
			// --company is the email command's persistent flag; without it
			// the run uses (or creates) the "Email qualification" company.
			if f := cmd.Flag("company"); f != nil {
				o.CompanyID = f.Value.String()
			}
			if o.CompanyID == "" {
				o.CompanyID = env.CompanyID
			}
			o.Token = env.APIKey
			if strings.HasPrefix(o.Token, "pcr_") {
				return errors.New("qualification needs board authority: PAPERCLIP_API_KEY holds an agent run token")
			}
			if o.Server == "" {
				o.Server = env.ServerURL()
			}
			if o.ProviderURL == "" {
				o.ProviderURL = env.AgentMailAPIURL
				if o.Emulator != "" {
					o.ProviderURL = strings.TrimRight(o.Emulator, "/") + "/v0"
				}
				if o.ProviderURL == "" {
					o.ProviderURL = agentmail.DefaultAPIBaseURL
				}
			}
			for _, m := range strings.Split(modes, ",") {
				if m = strings.TrimSpace(m); m != "" {
					o.Modes = append(o.Modes, m)
				}
			}
			progressOut := cmd.OutOrStdout()
			if asJSON {
				progressOut = cmd.ErrOrStderr()
			}
			p := newProgress(progressOut)
			o.Progress = p
			rep, err := qualify.Run(cmd.Context(), o)
			p.stop()
			if err != nil {
				return err
			}
			if err := rep.Table(progressOut); err != nil {
				return err
			}
			if reportFile != "" {
				var buf bytes.Buffer
				if err := rep.Markdown(&buf); err != nil {
					return err
				}
				if err := writeReport(reportFile, buf.Bytes()); err != nil {
					return fmt.Errorf("write the report: %w", err)
				}
				fmt.Fprintf(progressOut, "Report written to %s\n", reportFile)
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				if err := enc.Encode(rep); err != nil {
					return err
				}
			}
			if !rep.Passed {
				return exitError{code: 1}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Server, "server", "", "control plane URL (default $PAPERCLIP_API_URL, else http://$PAPERCLIP_LISTEN, else http://127.0.0.1:3100)")
	f.StringVar(&keyFile, "api-key-file", "", "file holding the AgentMail API key (- for stdin); without it the key is asked for")
	f.StringVar(&o.Recipient, "recipient", "", "the approved test recipient (required)")
	f.StringVar(&modes, "modes", qualify.ModeWebSocket, "receive modes to qualify, comma-separated: websocket,webhook (webhook needs the server's public HTTPS URL)")
	f.StringVar(&reportFile, "report", "", "write the Markdown report to this file")
	f.BoolVar(&asJSON, "json", false, "print the report as JSON on stdout (progress goes to stderr)")
	f.StringVar(&o.Emulator, "emulator", "", "AgentMail emulator base URL: qualify against the emulator (drops sockets through its control API)")
	f.StringVar(&o.ProviderURL, "agentmail-url", "", "AgentMail REST base (default $PAPERCLIP_AGENTMAIL_API_URL, else the real provider; with --emulator its /v0)")
	f.StringVar(&o.Inbox, "inbox", "", "attach this existing provider inbox (default: the key's own inbox, or a new one)")
	f.StringVar(&o.Username, "username", "", "username of a new inbox (default paperclip-qualify-<run>)")
	f.DurationVar(&o.Timeout, "timeout", 2*time.Minute, "how long to wait for each event")
	f.DurationVar(&o.Settle, "settle", 5*time.Second, "time a new live connection gets to subscribe (real provider only)")
	_ = cmd.MarkFlagRequired("recipient")
	return cmd
}

// readAgentMailKey reads the key from a file, stdin ("-") or a prompt that
// does not echo. A key is never taken from a flag value: flags end up in
// shell history and process listings.
func readAgentMailKey(cmd *cobra.Command, file string) (string, error) {
	var raw []byte
	var err error
	switch {
	case file == "-":
		raw, err = io.ReadAll(io.LimitReader(cmd.InOrStdin(), 8192))
	case file != "":
		raw, err = os.ReadFile(file)
	default:
		in, ok := cmd.InOrStdin().(*os.File)
		if !ok || !term.IsTerminal(int(in.Fd())) {
			return "", errors.New("no AgentMail key: give --api-key-file FILE (or - for stdin), or run on a terminal to be asked")
		}
		fmt.Fprint(cmd.ErrOrStderr(), "AgentMail API key (not echoed): ")
		raw, err = term.ReadPassword(int(in.Fd()))
		fmt.Fprintln(cmd.ErrOrStderr())
	}
	if err != nil {
		return "", fmt.Errorf("read the AgentMail key: %w", err)
	}
	key := strings.TrimSpace(string(raw))
	if key == "" || strings.ContainsAny(key, " \t\r\n") {
		return "", errors.New("the AgentMail key is empty or spans several lines")
	}
	return key, nil
}

// writeReport writes a qualification report readable by its owner only
// (it names inboxes, addresses and provider message ids). It never
// follows a symbolic link at path: the command may run as root, and a
// link planted where the report goes would otherwise have it overwrite
// the link's target. An existing report is truncated and made 0600.
func writeReport(path string, data []byte) error {
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&os.ModeSymlink != 0 {
		return fmt.Errorf("%s is a symbolic link: refusing to follow it; choose another path", path)
	}
	// O_NOFOLLOW closes the race between the check above and the open.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0o600)
	if errors.Is(err, syscall.ELOOP) {
		return fmt.Errorf("%s is a symbolic link: refusing to follow it; choose another path", path)
	}
	if err != nil {
		return err
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = fmt.Errorf("%s is not a regular file", path)
	}
	if err == nil {
		err = f.Chmod(0o600)
	}
	if err == nil {
		_, err = f.Write(data)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
