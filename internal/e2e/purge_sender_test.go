package e2e_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/emulator"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// TestPurgeSenderCommand runs `paperclipai admin purge-sender` (the built
// binary) against a server's database with real mail in it, as an operator
// answering a data-subject request would (docs/deployment.md, "Data
// retention"): bad input is refused with the reason before anything is
// touched; the command then blanks the text and attachments of the
// messages from the address and of those sent to it (here as Cc), and the
// task comments they became, keeps every task, comment and message row and
// the other sender's mail, reports what it freed, and writes one audit line
// naming who asked and a hash of the address, never the address. A second
// run finds nothing left.
func TestPurgeSenderCommand(t *testing.T) {
	bin := testkit.Binary(t)
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := testkit.NewEmailEnv(t, url)
		inbox := e.Setup("dsr", nil)["address"].(string)
		e.Deliver(t, inbox, emulator.DeliverRequest{From: "Alice <alice@example.com>", Subject: "Alice writes", Text: "alice-canary-4411",
			Attachments: []emulator.DeliverAttachment{{Filename: "alice.txt", ContentType: "text/plain",
				ContentBase64: base64.StdEncoding.EncodeToString([]byte("alice-attachment-canary"))}}})
		e.Deliver(t, inbox, emulator.DeliverRequest{From: "Carol <carol@example.com>", Cc: []string{"Alice <ALICE@example.com>"},
			Subject: "Carol copies Alice", Text: "carol-to-alice-canary-5522"})
		e.Deliver(t, inbox, emulator.DeliverRequest{From: "Bob <alibob@example.com>", Subject: "Bob writes", Text: "bob-canary-6633"})
		d := e.Store.DB
		ctx := context.Background()
		count := func(q string, args ...any) int {
			t.Helper()
			var n int
			if err := d.QueryRowContext(ctx, q, args...).Scan(&n); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
			return n
		}
		testkit.Eventually(t, 30*time.Second, "three messages retained, each a task comment, with the attachment", func() bool {
			return count(`SELECT COUNT(*) FROM email_messages WHERE company_id = $1 AND comment_id IS NOT NULL`, e.CompanyID) == 3 &&
				count(`SELECT COUNT(*) FROM attachments WHERE company_id = $1`, e.CompanyID) == 1
		})
		tasks := count(`SELECT COUNT(*) FROM issues WHERE company_id = $1`, e.CompanyID)
		comments := count(`SELECT COUNT(*) FROM issue_comments WHERE company_id = $1`, e.CompanyID)

		env := []string{"PAPERCLIP_DATABASE_URL=" + url}
		purge := func(args ...string) (int, string) {
			return runCmd(t, env, bin, append([]string{"admin", "purge-sender", "--home", e.Home}, args...)...)
		}
		for _, bad := range []struct {
			args []string
			want string
		}{
			{[]string{"alice@example.com"}, "--requested-by is required"},
			{[]string{"not-an-address", "--requested-by", "ops@example.com"}, `not an email address: "not-an-address"`},
			{[]string{"alice@example.com, bob@example.com", "--requested-by", "ops@example.com"}, "not an email address"},
			{[]string{"--requested-by", "ops@example.com"}, "accepts 1 arg(s), received 0"},
		} {
			if code, out := purge(bad.args...); code == 0 || !strings.Contains(out, bad.want) {
				t.Errorf("purge-sender %q: exit %d, want a refusal saying %q:\n%s", bad.args, code, bad.want, out)
			}
		}
		if n := count(`SELECT COUNT(*) FROM email_messages WHERE company_id = $1 AND content_purged_at IS NOT NULL`, e.CompanyID); n != 0 {
			t.Fatalf("a refused purge-sender purged %d messages", n)
		}

		code, out := purge("Alice <alice@example.com>", "--requested-by", "dpo@example.com")
		if code != 0 || !strings.Contains(out, "company "+e.CompanyID+": 2 message(s)") || !strings.Contains(out, "1 attachment(s)") {
			t.Fatalf("purge-sender: exit %d, want 2 messages and 1 attachment of company %s freed:\n%s", code, e.CompanyID, out)
		}
		for _, canary := range []string{"alice-canary-4411", "carol-to-alice-canary-5522"} {
			like := "%" + canary + "%"
			if n := count(`SELECT COUNT(*) FROM email_messages WHERE text LIKE $1 OR full_text LIKE $1`, like); n != 0 {
				t.Errorf("%s is still in %d retained message(s)", canary, n)
			}
			if n := count(`SELECT COUNT(*) FROM issue_comments WHERE body LIKE $1`, like); n != 0 {
				t.Errorf("%s is still in %d task comment(s)", canary, n)
			}
		}
		if n := count(`SELECT COUNT(*) FROM attachments WHERE company_id = $1`, e.CompanyID); n != 0 {
			t.Errorf("alice's attachment is still stored (%d)", n)
		}
		if n := count(`SELECT COUNT(*) FROM email_messages WHERE text LIKE '%bob-canary-6633%'`); n != 1 {
			t.Errorf("bob's message (alibob@example.com, not alice) was purged too")
		}
		if got := count(`SELECT COUNT(*) FROM issues WHERE company_id = $1`, e.CompanyID); got != tasks {
			t.Errorf("tasks: %d after the purge, %d before; the tasks must stay", got, tasks)
		}
		if got := count(`SELECT COUNT(*) FROM issue_comments WHERE company_id = $1`, e.CompanyID); got != comments {
			t.Errorf("comments: %d after the purge, %d before; the rows must stay", got, comments)
		}
		if n := count(`SELECT COUNT(*) FROM email_messages WHERE company_id = $1`, e.CompanyID); n != 3 {
			t.Errorf("%d message rows after the purge, want the 3 rows kept", n)
		}

		acts, err := e.Store.ListActivity(ctx, d, e.CompanyID, 200)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256([]byte("alice@example.com"))
		var audits []string
		for _, a := range acts {
			if a.Action == "retention.purged_sender" {
				audits = append(audits, string(a.Details))
			}
		}
		if len(audits) != 1 || !strings.Contains(audits[0], "dpo@example.com") || !strings.Contains(audits[0], hex.EncodeToString(sum[:])) ||
			strings.Contains(strings.ToLower(audits[0]), "alice") {
			t.Errorf("audit lines retention.purged_sender = %q, want one naming dpo@example.com and the address's SHA-256, not the address", audits)
		}

		code, out = purge("alice@example.com", "--requested-by", "dpo@example.com")
		if code != 0 || !strings.Contains(out, "no retained email from or to that address") {
			t.Errorf("a second purge-sender: exit %d\n%s", code, out)
		}
	})
}
