package server_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/store"
)

// cliPagingInboxes is more than one page at the largest limit (200).
const cliPagingInboxes = 251

// TestCLIListCommandsReadEveryPage: the CLI's list commands (`email
// inboxes`, `email status`) follow the inbox list's pages to the end, on
// both databases: every inbox is printed once, none left behind the first
// page.
func TestCLIListCommandsReadEveryPage(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, databaseURL string) {
		e := setup(t, databaseURL)
		e.board.JSON("PATCH", "/api/instance/settings", map[string]any{"experimental": map[string]any{"enableChatConnectors": true}}, 200)
		company := e.company("Many Inboxes")
		agent := e.shellAgent(company, "Mailer", "true", nil)
		st := e.inst.Store
		want := map[string]bool{}
		err := st.Tx(context.Background(), func(tx *sql.Tx) error {
			for i := range cliPagingInboxes {
				ep := domain.EmailEndpoint{ID: store.NewID(), CompanyID: company, AssignedAgentID: agent, Status: domain.EndpointDraft,
					DisplayName: fmt.Sprintf("Inbox %d", i), ReceiveMode: "websocket"}
				if _, err := st.InsertEndpoint(context.Background(), tx, &ep); err != nil {
					return err
				}
				want[ep.ID] = true
			}
			return nil
		})
		if err != nil {
			t.Fatalf("seed inboxes: %v", err)
		}
		// run runs the CLI as the local board and returns its stdout and
		// exit code (stderr joins stdout when the exit is 1, an error).
		run := func(args ...string) ([]byte, int) {
			cmd := exec.Command(e.bin, args...)
			cmd.Env = append(os.Environ(), "PAPERCLIP_API_URL="+e.inst.URL()+"/api", "PAPERCLIP_API_KEY=", "PAPERCLIP_RUN_ID=",
				"PAPERCLIP_COMPANY_ID=")
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			var exit *exec.ExitError
			if errors.As(err, &exit) {
				if exit.ExitCode() == 1 {
					out = append(out, stderr.String()...)
				}
				return out, exit.ExitCode()
			}
			if err != nil {
				t.Fatalf("%v: %v (stderr %s)", args, err, stderr.String())
			}
			return out, 0
		}
		// check holds when ids are exactly the seeded inboxes, each once.
		check := func(what string, ids []string) {
			t.Helper()
			seen := map[string]int{}
			for _, id := range ids {
				seen[id]++
				if seen[id] > 1 {
					t.Fatalf("%s: inbox %s printed twice", what, id)
				}
				if !want[id] {
					t.Fatalf("%s: inbox %s was not seeded", what, id)
				}
			}
			if len(seen) != len(want) {
				t.Fatalf("%s: %d inboxes printed, want all %d", what, len(seen), len(want))
			}
		}
		decode := func(what string, out []byte) []string {
			t.Helper()
			var rows []struct {
				ID string `json:"id"`
			}
			if err := json.Unmarshal(out, &rows); err != nil {
				t.Fatalf("%s: %v: %.300s", what, err, out)
			}
			ids := make([]string, 0, len(rows))
			for _, r := range rows {
				ids = append(ids, r.ID)
			}
			return ids
		}

		out, code := run("email", "inboxes", "--company", company)
		if code != 0 {
			t.Fatalf("email inboxes: exit %d: %.300s", code, out)
		}
		check("email inboxes", decode("email inboxes", out))

		// Draft inboxes are setup_incomplete, so `email status` exits 3
		// after printing them.
		out, code = run("email", "status", "--company", company, "--json")
		if code != 3 {
			t.Fatalf("email status --json: exit %d, want 3 (drafts need setup)", code)
		}
		check("email status --json", decode("email status --json", out))

		out, code = run("email", "status", "--company", company)
		if code != 3 {
			t.Fatalf("email status: exit %d, want 3", code)
		}
		var ids []string
		for _, line := range strings.Split(string(out), "\n") {
			if id, ok := strings.CutPrefix(line, "  inbox:      "); ok {
				ids = append(ids, id)
			}
		}
		check("email status", ids)
	})
}
