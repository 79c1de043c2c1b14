package retention_test

import (
	"context"
	"encoding/base64"
	"github.com/paperclipai/paperclipai/internal/heartbeat"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/emulator"
	"github.com/paperclipai/paperclipai/internal/retention"
	"github.com/paperclipai/paperclipai/internal/store"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

func count(t *testing.T, d *db.DB, q string, args ...any) int {
	t.Helper()
	var n int
	if err := d.QueryRowContext(context.Background(), q, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

func days(n int) *int { return &n }

// TestRetention delivers real mail (one with an attachment) through the
// emulator, then: the defaults purge nothing; purge-sender blanks exactly
// one address's messages and audits it without naming the address;
// settings of one day, applied two days later, purge the rest of the email
// content, the run logs and the done task's directory, keep every task and
// message row, audit what was freed, and the daily lease lets one purge
// run per day.
func TestRetention(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, dialect db.Dialect, url string) {
		e := testkit.NewEmailEnv(t, url)
		addr := e.Setup("keep", nil)["address"].(string)
		ctx := context.Background()
		d := e.Store.DB
		e.Deliver(t, addr, emulator.DeliverRequest{From: "Alice <alice@example.com>", Subject: "From Alice", Text: "alice's secret plans",
			Attachments: []emulator.DeliverAttachment{{Filename: "plan.txt", ContentType: "text/plain",
				ContentBase64: base64.StdEncoding.EncodeToString([]byte("the attached plan"))}}})
		e.Deliver(t, addr, emulator.DeliverRequest{From: "Bob <alibob@example.com>", Subject: "From Bob", Text: "bob's note"})
		testkit.Eventually(t, 30*time.Second, "both messages retained with the attachment", func() bool {
			return count(t, d, `SELECT COUNT(*) FROM email_messages WHERE company_id = $1`, e.CompanyID) == 2 &&
				count(t, d, `SELECT COUNT(*) FROM attachments WHERE company_id = $1`, e.CompanyID) == 1
		})
		testkit.Eventually(t, 30*time.Second, "the runs of both tasks to finish", func() bool {
			return count(t, d, `SELECT COUNT(*) FROM heartbeat_runs WHERE company_id = $1 AND finished_at IS NOT NULL`, e.CompanyID) >= 2 &&
				count(t, d, `SELECT COUNT(*) FROM heartbeat_runs WHERE company_id = $1 AND finished_at IS NULL`, e.CompanyID) == 0
		})
		// Give the runs a log to purge (the /bin/true agent prints nothing).
		if _, err := d.ExecContext(ctx, `UPDATE heartbeat_run_logs SET content = 'run output', size_bytes = 10
			WHERE run_id IN (SELECT id FROM heartbeat_runs WHERE company_id = $1)`, e.CompanyID); err != nil {
			t.Fatal(err)
		}
		tasks := count(t, d, `SELECT COUNT(*) FROM issues WHERE company_id = $1`, e.CompanyID)

		svc := &retention.Service{Store: e.Store, WorkspacesDir: filepath.Join(e.Home, "workspaces")}
		job := &retention.Job{Service: svc, Holder: "test:1", Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
		u, err := svc.Usage(ctx, e.CompanyID)
		if err != nil || u.EmailBytes == 0 || u.AttachmentBytes != int64(len("the attached plan")) || u.RunLogBytes == 0 {
			t.Fatalf("usage = %+v, %v", u, err)
		}
		if r, err := job.RunDue(ctx); err != nil || !r.Empty() {
			t.Fatalf("defaults purged %+v, %v; they must keep everything", r, err)
		}

		// Search finds alice's message by a word of its text and by its
		// attachment's file name, and bob's by its text.
		for _, w := range []string{"plans", "plan"} {
			if n := len(emailHits(t, e.Store, e.CompanyID, w)); n != 1 {
				t.Fatalf("search %q before the purge: %d emails, want alice's", w, n)
			}
		}
		if n := len(emailHits(t, e.Store, e.CompanyID, "note")); n != 1 {
			t.Fatalf("search %q: %d emails, want bob's", "note", n)
		}

		// A data-subject request for alice: only her message.
		got, err := svc.PurgeSender(ctx, "ALICE@example.com", "ops@example.com")
		if err != nil {
			t.Fatal(err)
		}
		if r := got[e.CompanyID]; r.EmailMessages != 1 || r.Attachments != 1 || len(got) != 1 {
			t.Fatalf("purge-sender freed %+v", got)
		}
		if n := count(t, d, `SELECT COUNT(*) FROM email_messages WHERE company_id = $1 AND text LIKE '%secret plans%'`, e.CompanyID); n != 0 {
			t.Fatalf("alice's text is still retained")
		}
		if n := count(t, d, `SELECT COUNT(*) FROM issue_comments WHERE company_id = $1 AND body LIKE '%secret plans%'`, e.CompanyID); n != 0 {
			t.Fatalf("alice's text is still in a task comment")
		}
		if n := count(t, d, `SELECT COUNT(*) FROM issue_comments WHERE company_id = $1 AND body = $2`, e.CompanyID, retention.RemovedOnRequest); n != 1 {
			t.Fatalf("%d comments marked removed, want alice's one", n)
		}
		if n := count(t, d, `SELECT COUNT(*) FROM email_messages WHERE company_id = $1 AND text LIKE '%bob''s note%'`, e.CompanyID); n != 1 {
			t.Fatalf("bob's message was purged with alice's")
		}
		if n := count(t, d, `SELECT COUNT(*) FROM attachments WHERE company_id = $1`, e.CompanyID); n != 0 {
			t.Fatalf("alice's attachment is still there")
		}
		// Nor does search still find her message by what was removed
		// (nor show it in a snippet); her subject stays searchable.
		for _, w := range []string{"secret", "plans", "plan"} {
			if hits := emailHits(t, e.Store, e.CompanyID, w); len(hits) != 0 {
				t.Fatalf("search %q after the purge finds %q", w, hits)
			}
		}
		if hits := emailHits(t, e.Store, e.CompanyID, "alice"); len(hits) != 1 || strings.Contains(hits[0], "secret") {
			t.Fatalf("search %q after the purge: %q, want alice's message without its text", "alice", hits)
		}
		if n := len(emailHits(t, e.Store, e.CompanyID, "note")); n != 1 {
			t.Fatalf("search %q after alice's purge: %d emails, want bob's", "note", n)
		}
		acts, err := e.Store.ListActivity(ctx, d, e.CompanyID, 100)
		if err != nil {
			t.Fatal(err)
		}
		if a := findActivity(acts, "retention.purged_sender"); a == nil || strings.Contains(string(a.Details), "alice") ||
			!strings.Contains(string(a.Details), "ops@example.com") {
			t.Fatalf("purge-sender audit line: %+v", a)
		}

		// One-day limits, applied as of two days from now.
		set := retention.Settings{EmailDays: days(1), RunLogDays: days(1), TaskDirDays: days(1)}
		if err := svc.Put(ctx, e.CompanyID, set, domain.ActivityActor{Kind: "user", ID: "owner"}); err != nil {
			t.Fatal(err)
		}
		if err := svc.Put(ctx, e.CompanyID, retention.Settings{EmailDays: days(0)}, domain.ActivityActor{Kind: "user"}); err == nil {
			t.Fatal("0 days must be refused")
		}
		if _, err := d.ExecContext(ctx, `UPDATE issues SET status = 'done', completed_at = $1 WHERE company_id = $2`,
			time.Now().UTC(), e.CompanyID); err != nil {
			t.Fatal(err)
		}
		var taskID string
		if err := d.QueryRowContext(ctx, `SELECT id FROM issues WHERE company_id = $1 ORDER BY id LIMIT 1`, e.CompanyID).Scan(&taskID); err != nil {
			t.Fatal(err)
		}
		taskDir := heartbeat.TaskDirectory(svc.WorkspacesDir, e.CompanyID, taskID, false)
		if err := os.MkdirAll(taskDir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(taskDir, "notes.txt"), []byte("scratch"), 0o600); err != nil {
			t.Fatal(err)
		}
		later := time.Now().UTC().Add(48 * time.Hour)
		r, err := svc.PurgeDatabase(ctx, e.CompanyID, later)
		if err != nil {
			t.Fatal(err)
		}
		if r.EmailMessages != 1 || r.RunLogs < 2 || r.RunLogBytes < 20 {
			t.Fatalf("purge freed %+v", r)
		}
		rd, err := svc.PurgeTaskDirs(ctx, e.CompanyID, later)
		// Both tasks' runs made their workspaces; our file is in one.
		if err != nil || rd.TaskDirs != 2 || rd.TaskDirBytes < int64(len("scratch")) {
			t.Fatalf("task directory purge: %+v, %v", rd, err)
		}
		if _, err := os.Stat(taskDir); !os.IsNotExist(err) {
			t.Fatalf("the done task's directory is still there: %v", err)
		}
		if n := count(t, d, `SELECT COUNT(*) FROM email_messages WHERE company_id = $1 AND (text <> '' OR content_purged_at IS NULL)`, e.CompanyID); n != 0 {
			t.Fatalf("%d messages keep content", n)
		}
		if n := count(t, d, `SELECT COUNT(*) FROM email_messages WHERE company_id = $1`, e.CompanyID); n != 2 {
			t.Fatalf("message rows: %d, want both kept", n)
		}
		if dialect == db.SQLite {
			// SQLite's search index keeps its own copy of the text (the
			// task comment the message became keeps it: retention keeps
			// comments).
			if n := count(t, d, `SELECT COUNT(*) FROM search_fts WHERE body LIKE '%bob''s note%'
				AND rowid IN (SELECT rid FROM search_docs WHERE kind = 'email')`); n != 0 {
				t.Fatalf("bob's purged text is still in the search index")
			}
		}
		// The retention purge keeps subjects; a later data-subject
		// request for bob still removes his subject and name, and renames
		// his task.
		got, err = svc.PurgeSender(ctx, "alibob@example.com", "ops@example.com")
		if r := got[e.CompanyID]; err != nil || r.EmailMessages != 0 || r.Subjects != 1 || len(got) != 1 {
			t.Fatalf("purge-sender after the retention purge freed %+v, %v; want bob's subject", got, err)
		}
		if n := count(t, d, `SELECT COUNT(*) FROM email_messages WHERE company_id = $1 AND CAST(envelope AS TEXT) LIKE '%From Bob%'`, e.CompanyID); n != 0 {
			t.Fatalf("bob's subject is still in the envelope")
		}
		if n := count(t, d, `SELECT COUNT(*) FROM issues WHERE company_id = $1 AND title = $2`, e.CompanyID, retention.PurgedTitle); n != 2 {
			t.Fatalf("%d tasks titled %q, want alice's and bob's", n, retention.PurgedTitle)
		}
		if n := count(t, d, `SELECT COUNT(*) FROM issues WHERE company_id = $1`, e.CompanyID); n != tasks {
			t.Fatalf("tasks: %d, want %d kept", n, tasks)
		}
		if n := count(t, d, `SELECT COUNT(*) FROM heartbeat_run_logs WHERE size_bytes > 0 AND run_id IN (SELECT id FROM heartbeat_runs WHERE company_id = $1)`, e.CompanyID); n != 0 {
			t.Fatalf("%d run logs kept", n)
		}
		acts, _ = e.Store.ListActivity(ctx, d, e.CompanyID, 100)
		if findActivity(acts, "retention.purged") == nil || findActivity(acts, "retention.updated") == nil {
			t.Fatal("no audit line for the purge or the settings")
		}

		// The daily lease: the first RunDue of the day purges, a second
		// (another replica's) finds it done.
		if _, err := job.RunDue(ctx); err != nil {
			t.Fatal(err)
		}
		other := &retention.Job{Service: svc, Holder: "test:2", Log: job.Log}
		if n := count(t, d, `SELECT COUNT(*) FROM maintenance_leases WHERE name = 'retention' AND last_done_at IS NOT NULL`); n != 1 {
			t.Fatal("the daily purge was not recorded")
		}
		var first string
		if err := d.QueryRowContext(ctx, `SELECT CAST(last_done_at AS TEXT) FROM maintenance_leases WHERE name = 'retention'`).Scan(&first); err != nil {
			t.Fatal(err)
		}
		if _, err := other.RunDue(ctx); err != nil {
			t.Fatal(err)
		}
		var second string
		if err := d.QueryRowContext(ctx, `SELECT CAST(last_done_at AS TEXT) FROM maintenance_leases WHERE name = 'retention'`).Scan(&second); err != nil {
			t.Fatal(err)
		}
		if first != second {
			t.Fatalf("a second replica ran the daily purge again the same day (%s, then %s)", first, second)
		}
	})
}

// emailHits returns the snippets of the company's retained email that
// search finds by word.
func emailHits(t *testing.T, st *store.Store, companyID, word string) []string {
	t.Helper()
	hits, err := st.Search(context.Background(), st.DB, store.SearchQuery{CompanyID: companyID, Kinds: []string{store.SearchEmail},
		Words: []string{word}}, store.Page{Limit: 50})
	if err != nil {
		t.Fatalf("search %q: %v", word, err)
	}
	out := make([]string, len(hits))
	for i, h := range hits {
		out[i] = h.Snippet
	}
	return out
}

func findActivity(acts []domain.Activity, action string) *domain.Activity {
	for i := range acts {
		if acts[i].Action == action {
			return &acts[i]
		}
	}
	return nil
}
