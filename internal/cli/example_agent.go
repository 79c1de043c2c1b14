package cli

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"

	"github.com/spf13/cobra"

	"github.com/paperclipai/paperclipai/internal/config"
)

// newExampleAgentCmd builds built-in example agents for demos and tests.
func newExampleAgentCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "example-agent", Short: "Built-in example agents (for the demo)"}
	cmd.AddCommand(&cobra.Command{
		Use:   "autoreply",
		Short: "Answer the newest inbound email of the current task through `paperclipai email reply`, then mark the task done",
		Args:  cobra.NoArgs,
		RunE:  runAutoreply,
	}, newMCPAutoreplyCmd())
	return cmd
}

// threadMessage is one message of a threadView.
type threadMessage struct {
	ProviderMessageID string `json:"providerMessageId"`
	From              string `json:"from"`
	Text              string `json:"text"`
	Direction         string `json:"direction"`
	Automatic         bool   `json:"automatic"`
}

// threadView is the part of the thread JSON the example agents read.
type threadView struct {
	ConversationID string `json:"conversationId"`
	Subject        string `json:"subject"`
	Endpoint       struct {
		ID string `json:"id"`
	} `json:"endpoint"`
	Messages     []threadMessage `json:"messages"`
	Publications []struct {
		Request struct {
			ReplyToMessageID string `json:"replyToMessageId"`
		} `json:"request"`
	} `json:"publications"`
}

// nextUnanswered returns the newest human inbound message no earlier send
// of the thread answered.
func (th *threadView) nextUnanswered() (threadMessage, bool) {
	answered := map[string]bool{}
	for _, p := range th.Publications {
		answered[p.Request.ReplyToMessageID] = true
	}
	for i := len(th.Messages) - 1; i >= 0; i-- {
		m := th.Messages[i]
		if m.Direction == "inbound" && !m.Automatic && !answered[m.ProviderMessageID] {
			return m, true
		}
	}
	return threadMessage{}, false
}

// self runs this binary's CLI with args, as any agent would.
func self(stdin []byte, args ...string) ([]byte, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	c := exec.Command(exe, args...)
	if stdin != nil {
		c.Stdin = bytes.NewReader(stdin)
	}
	var stderr bytes.Buffer
	c.Stderr = &stderr
	out, err := c.Output()
	if err != nil {
		return nil, fmt.Errorf("paperclipai %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// stableUUID derives a UUID from s, so a retried run reuses the same
// idempotency key for the same reply.
func stableUUID(s string) string {
	sum := sha256.Sum256([]byte("paperclip-example-autoreply:" + s))
	h := hex.EncodeToString(sum[:16])
	return h[0:8] + "-" + h[8:12] + "-4" + h[13:16] + "-a" + h[17:20] + "-" + h[20:32]
}

func runAutoreply(cmd *cobra.Command, _ []string) error {
	task := config.LoadClient(nil).TaskID
	if task == "" {
		return errors.New("PAPERCLIP_TASK_ID is not set: run me as an agent")
	}
	out, err := self(nil, "email", "thread", task)
	if err != nil {
		return err
	}
	var th *threadView
	if err := json.Unmarshal(out, &th); err != nil {
		return fmt.Errorf("read thread: %w", err)
	}
	if th == nil {
		fmt.Fprintln(cmd.OutOrStdout(), "task has no email thread; nothing to do")
		return nil
	}
	m, ok := th.nextUnanswered()
	if !ok {
		// A retried run whose reply already went out still completes
		// the task.
		fmt.Fprintln(cmd.OutOrStdout(), "no unanswered inbound email")
		return markDone(task)
	}
	excerpt := strings.TrimSpace(m.Text)
	if len(excerpt) > 280 {
		excerpt = excerpt[:280] + "…"
	}
	text := fmt.Sprintf("Hello,\n\nThanks for your email about %q. This is the Paperclip demo assistant; I received:\n\n> %s\n\nA teammate will follow up if needed.\n\n— Mail Assistant",
		th.Subject, strings.ReplaceAll(excerpt, "\n", "\n> "))
	req, _ := json.Marshal(map[string]any{"endpointId": th.Endpoint.ID, "conversationId": th.ConversationID,
		"replyToMessageId": m.ProviderMessageID, "replyAll": false, "text": text,
		"idempotencyKey": stableUUID(th.ConversationID + "|" + m.ProviderMessageID)})
	res, err := self(req, "email", "reply", "--file", "-")
	if err != nil {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "replied to %s: %s", m.From, res)
	return markDone(task)
}

// doneRequest is the task update the example agents send once the email is
// answered: sending email does not complete a task by itself, and a reply
// in the thread reopens it.
var doneRequest = []byte(`{"status":"done"}`)

// markDone marks the run's task done through the API, as any agent would.
func markDone(task string) error {
	if _, err := self(doneRequest, "api", "PATCH", "/issues/"+task, "--data", "-"); err != nil {
		return fmt.Errorf("mark the task done: %w", err)
	}
	return nil
}
