package e2e_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"slices"
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
// touched; the command then removes the content of the messages from the
// address, of those sent to it (here as Cc) and of the reply sent to it
// (text, subject, sender names, attachments and their file names, the
// provider events and send requests they came from or went out as, the
// search index), renames the tasks they made to a neutral title, keeps
// every task, comment and message row and the other sender's mail,
// reports what it freed, and writes one audit line naming who asked and a
// hash of the address, never the address. Then no canary of that mail is
// left in any column of any table (the other sender's canaries, checked
// the same way, are). A second run finds nothing left.
func TestPurgeSenderCommand(t *testing.T) {
	bin := testkit.Binary(t)
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := testkit.NewEmailEnv(t, url)
		endpoint := e.Setup("dsr", nil)
		inbox := endpoint["address"].(string)
		// Canaries: one word each, lower case (search indexes keep words,
		// lower-cased), none a part of another.
		e.Deliver(t, inbox, emulator.DeliverRequest{From: "Alice Qznamealice <alice@example.com>", Subject: "Qzsubjalice here",
			Text: "alice-canary-4411 qzbodyalice",
			Attachments: []emulator.DeliverAttachment{{Filename: "qzfilealice.txt", ContentType: "text/plain",
				ContentBase64: base64.StdEncoding.EncodeToString([]byte("qzattalice alice-attachment-canary"))}}})
		e.Deliver(t, inbox, emulator.DeliverRequest{From: "Carol Qznamecarol <carol@example.com>", Cc: []string{"Alice <ALICE@example.com>"},
			Subject: "Qzsubjcarol copies Alice", Text: "carol-to-alice-canary-5522 qzbodycarol"})
		e.Deliver(t, inbox, emulator.DeliverRequest{From: "Bob Qznamebob <alibob@example.com>", Subject: "Qzsubjbob writes",
			Text: "bob-canary-6633 qzbodybob"})
		// Held apart: automatic mail is quarantined.
		e.Deliver(t, inbox, emulator.DeliverRequest{From: "Alice Qznamealice <alice@example.com>", Subject: "Qzsubjspam out of office",
			Text: "qzbodyspam", Headers: map[string]string{"Auto-Submitted": "auto-replied"}})
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
		// A reply to alice, sent from her task.
		var aliceTask string
		testkit.Eventually(t, 30*time.Second, "alice's task", func() bool {
			for _, is := range e.Board.List("/api/companies/" + e.CompanyID + "/issues?originKind=chat_channel") {
				if strings.Contains(is["title"].(string), "Qzsubjalice") {
					aliceTask = is["id"].(string)
				}
			}
			return aliceTask != ""
		})
		th := e.Board.JSON("GET", "/api/companies/"+e.CompanyID+"/email/tasks/"+aliceTask, nil, 200)
		e.Board.JSON("POST", "/api/companies/"+e.CompanyID+"/email/send", map[string]any{"endpointId": testkit.ID(endpoint),
			"conversationId": th["conversationId"], "replyToMessageId": th["messages"].([]any)[0].(map[string]any)["providerMessageId"],
			"text": "qzbodyout from us", "attachmentIds": []string{}, "idempotencyKey": testkit.NewUUID()}, 202)
		// And a new email to her from a task of ours: it makes a subtask
		// of its own, titled with the subject; ours keeps its title.
		outreach := testkit.ID(e.Board.JSON("POST", "/api/companies/"+e.CompanyID+"/issues", map[string]any{"title": "Outreach"}, 201))
		e.Board.JSON("POST", "/api/companies/"+e.CompanyID+"/email/send", map[string]any{"endpointId": testkit.ID(endpoint), "parentIssueId": outreach,
			"to": []string{"alice@example.com"}, "subject": "Qzsubjnew for you", "text": "qzbodynew from us", "attachmentIds": []string{},
			"idempotencyKey": testkit.NewUUID()}, 202)
		testkit.Eventually(t, 30*time.Second, "both sends retained, the automatic reply quarantined", func() bool {
			return count(`SELECT COUNT(*) FROM email_messages WHERE company_id = $1 AND direction = 'outbound'`, e.CompanyID) == 2 &&
				count(`SELECT COUNT(*) FROM email_quarantine WHERE company_id = $1`, e.CompanyID) == 1
		})
		aliceCanaries := []string{"qznamealice", "qzsubjalice", "qzbodyalice", "qzfilealice", "qzattalice", "qzsubjcarol", "qzbodycarol", "qzbodyout",
			"qzsubjnew", "qzbodynew", "qzsubjspam", "qzbodyspam",
			"alice-canary-4411", "carol-to-alice-canary-5522"}
		bobCanaries := []string{"qznamebob", "qzsubjbob", "qzbodybob"}
		for _, c := range append(slices.Clone(aliceCanaries), bobCanaries...) {
			if len(scanDatabase(t, d, c)) == 0 {
				t.Fatalf("canary %q is nowhere in the database before the purge: the scan cannot see it", c)
			}
		}
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
		if code != 0 || !strings.Contains(out, "company "+e.CompanyID+": 4 message(s)") || !strings.Contains(out, "1 attachment(s)") ||
			!strings.Contains(out, "4 subject(s); 2 send(s), 1 quarantined message(s)") {
			t.Fatalf("purge-sender: exit %d, want 4 messages (content and subject), 1 attachment, 2 sends and 1 quarantined message of company %s freed:\n%s",
				code, e.CompanyID, out)
		}
		for _, c := range aliceCanaries {
			if where := scanDatabase(t, d, c); len(where) > 0 {
				t.Errorf("canary %q of alice's mail is still in %s", c, strings.Join(where, ", "))
			}
		}
		for _, c := range bobCanaries {
			if len(scanDatabase(t, d, c)) == 0 {
				t.Errorf("canary %q of bob's mail (not alice's) is gone", c)
			}
		}
		if got := count(`SELECT COUNT(*) FROM issues WHERE id = $1 AND title = 'Outreach'`, outreach); got != 1 {
			t.Errorf("the task the new email was sent from lost its title")
		}
		if got := count(`SELECT COUNT(*) FROM issues WHERE company_id = $1 AND title = $2`, e.CompanyID, "Email (purged)"); got != 3 {
			t.Errorf("%d tasks titled \"Email (purged)\", want alice's, carol's and the new email's 3", got)
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
		if n := count(`SELECT COUNT(*) FROM email_messages WHERE company_id = $1`, e.CompanyID); n != 5 {
			t.Errorf("%d message rows after the purge, want the 5 rows (3 received, 2 sent) kept", n)
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

// scanDatabase names the table.column places where needle (lower case)
// occurs in any row of any table of the database, every column read as
// text (a search index's words included) and byte columns as bytes.
func scanDatabase(t *testing.T, d *db.DB, needle string) []string {
	t.Helper()
	ctx := context.Background()
	type col struct{ table, column, typ string }
	var cols []col
	var q string
	if d.Dialect == db.Postgres {
		q = `SELECT table_name, column_name, data_type FROM information_schema.columns
			WHERE table_schema = current_schema() ORDER BY table_name, ordinal_position`
	} else {
		q = `SELECT m.name, p.name, p.type FROM sqlite_master m, pragma_table_info(m.name) p
			WHERE m.type = 'table' ORDER BY m.name, p.cid`
	}
	rows, err := d.QueryContext(ctx, q)
	if err != nil {
		t.Fatalf("list columns: %v", err)
	}
	for rows.Next() {
		var c col
		if err := rows.Scan(&c.table, &c.column, &c.typ); err != nil {
			t.Fatal(err)
		}
		cols = append(cols, c)
	}
	rows.Close()
	if len(cols) < 50 {
		t.Fatalf("only %d columns found: the scan would miss data", len(cols))
	}
	var found []string
	for _, c := range cols {
		var cond string
		switch {
		case d.Dialect == db.Postgres && c.typ == "bytea":
			cond = fmt.Sprintf(`position(convert_to($1, 'UTF8') in %q) > 0`, c.column)
		case d.Dialect == db.Postgres:
			cond = fmt.Sprintf(`LOWER(CAST(%q AS TEXT)) LIKE '%%' || $1 || '%%'`, c.column)
		default:
			// Bytes, so a NUL in a blob does not end the search.
			cond = fmt.Sprintf(`instr(CAST(LOWER(CAST(%q AS BLOB)) AS BLOB), CAST($1 AS BLOB)) > 0`, c.column)
		}
		var n int
		if err := d.QueryRowContext(ctx, fmt.Sprintf(`SELECT COUNT(*) FROM %q WHERE %s`, c.table, cond), needle).Scan(&n); err != nil {
			t.Fatalf("scan %s.%s: %v", c.table, c.column, err)
		}
		if n > 0 {
			found = append(found, fmt.Sprintf("%s.%s (%d rows)", c.table, c.column, n))
		}
	}
	return found
}
