package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/paperclipai/paperclipai/internal/emulator"
)

// newEmulatorCmd builds "paperclipai emulator" (run the standalone AgentMail
// emulator) and its "send" subcommand (deliver one inbound email).
func newEmulatorCmd() *cobra.Command {
	var (
		listen   string
		smtpAddr string
		apiKeys  []string
		delay    time.Duration
		state    string
	)
	cmd := &cobra.Command{
		Use:   "emulator",
		Short: "Standalone AgentMail emulator",
		Long: "Run a wire-compatible AgentMail emulator: REST under /v0, WebSocket at ws://<listen>/v0,\n" +
			"an optional SMTP listener for inbound mail, and a test control API under /_emulator/.\n" +
			"It runs until interrupted. See docs/emulator.md.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			logger := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelInfo}))
			if delay == 0 {
				delay = -1 // an explicit 0 means no delay; Options treats 0 as the default
			}
			srv, err := emulator.Start(cmd.Context(), emulator.Options{
				Listen: listen, SMTPListen: smtpAddr, APIKeys: apiKeys, DeliveryDelay: delay, Logger: logger, StateFile: state,
			})
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "AgentMail emulator\n  REST:      %s\n  WebSocket: %s\n", srv.APIURL(), srv.WebSocketURL())
			if a := srv.SMTPAddr(); a != "" {
				fmt.Fprintf(out, "  SMTP:      %s\n", a)
			}
			fmt.Fprintf(out, "  Control:   %s/_emulator/\n", srv.URL())
			if len(apiKeys) == 0 {
				fmt.Fprintf(out, "Create an organization and key: curl -X POST %s/_emulator/organizations\n", srv.URL())
			}
			<-cmd.Context().Done()
			if err := srv.Close(); err != nil {
				return fmt.Errorf("stop emulator: %w", err)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&listen, "listen", "127.0.0.1:3199", "HTTP listen address (REST, WebSocket, control API)")
	f.StringVar(&smtpAddr, "smtp", "127.0.0.1:2525", "SMTP listen address for inbound mail (empty: no SMTP)")
	f.StringArrayVar(&apiKeys, "api-key", nil, "pre-create an organization-scoped API key am_… (repeatable)")
	f.DurationVar(&delay, "delivery-delay", emulator.DefaultDeliveryDelay, "delay between message.sent and the delivery receipt")
	f.StringVar(&state, "state", "", "keep the mailboxes in this file across restarts (default: in memory only)")
	cmd.AddCommand(newEmulatorSendCmd())
	return cmd
}

func newEmulatorSendCmd() *cobra.Command {
	var (
		to, from, subject, text, inReplyTo, baseURL string
	)
	cmd := &cobra.Command{
		Use:   "send --to ADDR [flags]",
		Short: "Deliver one inbound email to an emulator inbox",
		Long: "Deliver one inbound email to the emulator inbox with address --to, as if a\n" +
			"sender had mailed it. Only --to is required; the answer names the message and\n" +
			"thread ids. --in-reply-to threads it on an earlier message.",
		Example: `  paperclipai emulator send --to assistant@agentmail.to --from you@example.com --subject "Hello" --text "Can you help me?"`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if to == "" {
				return fmt.Errorf("--to is required")
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), 30*time.Second)
			defer cancel()
			base := strings.TrimRight(baseURL, "/")
			inboxID, err := lookupEmulatorInbox(ctx, base, to)
			if err != nil {
				return err
			}
			req := emulator.DeliverRequest{From: from, Subject: subject, Text: text, InReplyTo: inReplyTo}
			body, err := json.Marshal(req)
			if err != nil {
				return fmt.Errorf("encode deliver request: %w", err)
			}
			resp, err := emulatorCall(ctx, http.MethodPost, base+"/_emulator/inboxes/"+url.PathEscape(inboxID)+"/deliver", body)
			if err != nil {
				return err
			}
			var pretty bytes.Buffer
			if json.Indent(&pretty, resp, "", "  ") != nil {
				pretty.Reset()
				pretty.Write(resp)
			}
			fmt.Fprintln(cmd.OutOrStdout(), pretty.String())
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&to, "to", "", "recipient inbox address (required)")
	f.StringVar(&from, "from", "Test Sender <sender@example.com>", "sender address")
	f.StringVar(&subject, "subject", "", "subject")
	f.StringVar(&text, "text", "", "plain-text body")
	f.StringVar(&inReplyTo, "in-reply-to", "", "Message-ID this email replies to")
	f.StringVar(&baseURL, "url", "http://127.0.0.1:3199", "emulator base URL")
	return cmd
}

// lookupEmulatorInbox resolves an address to a hosted inbox id.
func lookupEmulatorInbox(ctx context.Context, base, addr string) (string, error) {
	resp, err := emulatorCall(ctx, http.MethodGet, base+"/_emulator/inboxes?address="+url.QueryEscape(addr), nil)
	if err != nil {
		return "", err
	}
	var out struct {
		Inboxes []struct {
			InboxID string `json:"inbox_id"`
		} `json:"inboxes"`
	}
	if err := json.Unmarshal(resp, &out); err != nil {
		return "", fmt.Errorf("decode inbox lookup: %w", err)
	}
	if len(out.Inboxes) == 0 {
		return "", fmt.Errorf("no emulator inbox has the address %s", addr)
	}
	return out.Inboxes[0].InboxID, nil
}

// emulatorCall performs one control API request and returns the body of a
// 2xx response; other statuses become errors carrying the server message.
func emulatorCall(ctx context.Context, method, u string, body []byte) ([]byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("reach emulator: %w", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("read emulator response: %w", err)
	}
	if resp.StatusCode/100 != 2 {
		var e struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(data, &e) == nil && e.Message != "" {
			return nil, fmt.Errorf("emulator: %s (HTTP %d)", e.Message, resp.StatusCode)
		}
		return nil, fmt.Errorf("emulator: HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(data)))
	}
	return data, nil
}
