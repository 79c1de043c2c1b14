package server_test

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/csv"
	"encoding/json"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/store"
)

// TestActivityFiltersAndExport filters the audit log by action kind,
// actor, task and date range, and exports exactly the filtered entries
// as JSON Lines and CSV, on both databases; another company's entries
// never show.
func TestActivityFiltersAndExport(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, databaseURL string) {
		e := setup(t, databaseURL)
		ctx := context.Background()
		st := e.inst.Store
		a, b := e.company("Audit A"), e.company("Audit B")
		user, agent, taskX, taskY := store.NewID(), store.NewID(), store.NewID(), store.NewID()
		day := func(d int) time.Time { return time.Date(2020, 11, d, 12, 0, 0, 0, time.UTC) }
		entry := func(q db.Querier, company string, by domain.ActivityActor, action, task string, at time.Time) string {
			act, err := store.AuditEntry(by, company, action, "issue", task, map[string]string{"note": "x"})
			if err != nil {
				t.Fatal(err)
			}
			if err := st.InsertActivity(ctx, q, act); err != nil {
				t.Fatal(err)
			}
			if _, err := q.ExecContext(ctx, `UPDATE activity_log SET created_at = $1 WHERE id = $2`, at, act.ID); err != nil {
				t.Fatal(err)
			}
			return act.ID
		}
		u := domain.ActivityActor{Kind: "user", ID: user}
		ag := domain.ActivityActor{Kind: "agent", ID: agent, AgentID: agent}
		sys := domain.ActivityActor{Kind: "system", ID: "=HYPERLINK(\"x\")"}
		var e1, e2, e3, e4 string
		err := st.Tx(ctx, func(tx *sql.Tx) error {
			// Filler of another action, more than one export batch.
			for range 1100 {
				entry(tx, a, u, "filler.noise", taskY, day(1))
			}
			e1 = entry(tx, a, u, "issue.created", taskX, day(10))
			e2 = entry(tx, a, ag, "issue.updated", taskX, day(11))
			e3 = entry(tx, a, sys, "email.receipt", taskY, day(12))
			e4 = entry(tx, a, u, "comment.created", taskX, day(12).Add(time.Hour))
			entry(tx, b, u, "issue.created", taskX, day(10))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		list := func(filter string) []string {
			var ids []string
			path := "/api/companies/" + a + "/activity?limit=200&" + filter
			for path != "" {
				status, body, h := e.board.DoHeader("GET", path, nil)
				if status != 200 {
					t.Fatalf("GET %s: %d %s", path, status, body)
				}
				var rows []domain.Activity
				if err := json.Unmarshal(body, &rows); err != nil {
					t.Fatal(err)
				}
				for _, r := range rows {
					ids = append(ids, r.ID)
				}
				path = ""
				if c := h.Get("X-Next-Cursor"); c != "" {
					path = "/api/companies/" + a + "/activity?limit=200&" + filter + "&cursor=" + url.QueryEscape(c)
				}
			}
			return ids
		}
		for _, c := range []struct {
			filter string
			want   []string
		}{
			{"action=issue.", []string{e2, e1}},
			{"action=issue.created,email.", []string{e3, e1}},
			{"actor=" + user + "&action=issue.,comment.", []string{e4, e1}},
			{"actor=" + agent, []string{e2}},
			{"actorKind=system", []string{e3}},
			{"taskId=" + taskX, []string{e4, e2, e1}},
			{"since=2020-11-11&until=2020-11-11", []string{e2}},
			{"since=2020-11-11T00:00:00Z&until=2020-11-12T12:00:00Z", []string{e2}},
			{"since=2020-11-12&until=2020-11-30", []string{e4, e3}},
		} {
			if got := list(c.filter); !slices.Equal(got, c.want) {
				t.Errorf("activity?%s: %v, want %v", c.filter, got, c.want)
			}
		}
		// The company's own creation is audited now; the seeded entries
		// are all of November 2020.
		if got := list("until=2020-11-30"); len(got) != 1104 {
			t.Errorf("unfiltered: %d entries, want 1104", len(got))
		}
		for _, bad := range []string{"action=Issue%20created", "actorKind=robot", "taskId=nope", "since=yesterday", "until=2026-13-01"} {
			if st, body := e.board.Do("GET", "/api/companies/"+a+"/activity?"+bad, nil); st != 400 {
				t.Errorf("activity?%s: %d %s, want 400", bad, st, body)
			}
		}

		// JSON Lines: exactly the filtered entries, newest first.
		status, body, h := e.board.DoHeader("GET", "/api/companies/"+a+"/activity/export?format=jsonl&action=issue.,email.", nil)
		if status != 200 || !strings.Contains(h.Get("Content-Disposition"), "attachment") || h.Get("Content-Type") != "application/x-ndjson" {
			t.Fatalf("jsonl export: %d %v %s", status, h, body)
		}
		var got []string
		sc := bufio.NewScanner(bytes.NewReader(body))
		for sc.Scan() {
			var act domain.Activity
			if err := json.Unmarshal(sc.Bytes(), &act); err != nil {
				t.Fatalf("jsonl line %q: %v", sc.Text(), err)
			}
			got = append(got, act.ID)
		}
		if !slices.Equal(got, []string{e3, e2, e1}) {
			t.Errorf("jsonl export: %v, want %v", got, []string{e3, e2, e1})
		}

		// CSV: the header and every entry, more than one batch; a cell
		// that a spreadsheet would run as a formula is defused.
		status, body, h = e.board.DoHeader("GET", "/api/companies/"+a+"/activity/export?format=csv&until=2020-11-30", nil)
		if status != 200 || !strings.HasPrefix(h.Get("Content-Type"), "text/csv") {
			t.Fatalf("csv export: %d %v", status, h)
		}
		recs, err := csv.NewReader(bytes.NewReader(body)).ReadAll()
		if err != nil {
			t.Fatalf("csv: %v", err)
		}
		if len(recs) != 1105 || strings.Join(recs[0], ",") != "id,createdAt,actorKind,actorId,agentId,runId,action,entityType,entityId,details" {
			t.Fatalf("csv: %d rows, header %v", len(recs), recs[0])
		}
		ids := map[string]bool{}
		for _, r := range recs[1:] {
			ids[r[0]] = true
			if r[0] == e3 && r[3] != `'=HYPERLINK("x")` {
				t.Errorf("csv formula cell: %q", r[3])
			}
		}
		if len(ids) != 1104 || !ids[e1] || !ids[e4] {
			t.Errorf("csv export: %d distinct entries", len(ids))
		}
		if st, _ := e.board.Do("GET", "/api/companies/"+a+"/activity/export?format=xml", nil); st != 400 {
			t.Errorf("format=xml: %d, want 400", st)
		}

		// The CLI exports the same rows: `paperclipai activity export`
		// with the filters as flags, to stdout or to a file.
		cli := func(args ...string) (string, error) {
			cmd := exec.Command(e.bin, append([]string{"activity", "export", "--company", a}, args...)...)
			cmd.Env = append(os.Environ(), "PAPERCLIP_API_URL="+e.inst.URL()+"/api", "PAPERCLIP_API_KEY=")
			out, err := cmd.CombinedOutput()
			return string(out), err
		}
		out, err := cli("--action", "issue.,email.")
		if err != nil {
			t.Fatalf("activity export: %v\n%s", err, out)
		}
		got = nil
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			var act domain.Activity
			if err := json.Unmarshal([]byte(line), &act); err != nil {
				t.Fatalf("cli jsonl line %q: %v", line, err)
			}
			got = append(got, act.ID)
		}
		if !slices.Equal(got, []string{e3, e2, e1}) {
			t.Errorf("cli jsonl export: %v, want %v", got, []string{e3, e2, e1})
		}
		file := filepath.Join(t.TempDir(), "activity.csv")
		if out, err := cli("--format", "csv", "--actor-kind", "user", "--task", taskX, "--since", "2020-11-10", "--until", "2020-11-30", "--out", file); err != nil {
			t.Fatalf("activity export --format csv --out: %v\n%s", err, out)
		}
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		recs, err = csv.NewReader(bytes.NewReader(data)).ReadAll()
		if err != nil || len(recs) != 3 || recs[1][0] != e4 || recs[2][0] != e1 {
			t.Errorf("cli csv export: %v %q", err, data)
		}
		if out, err := cli("--since", "yesterday", "--out", filepath.Join(t.TempDir(), "bad.jsonl")); err == nil ||
			!strings.Contains(out, "since must be an RFC 3339 time") || !strings.Contains(out, "HTTP 400") {
			t.Errorf("cli export with a bad filter: %v\n%s", err, out)
		}
		if out, err := cli("--format", "xml"); err == nil || !strings.Contains(out, "--format must be jsonl or csv") {
			t.Errorf("cli export --format xml: %v\n%s", err, out)
		}
	})
}
