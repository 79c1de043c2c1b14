package server_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/emulator"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// companyTables lists the tables with a company_id column.
func companyTables(t *testing.T, inst *testkit.Instance, d db.Dialect) []string {
	t.Helper()
	ctx := context.Background()
	var tables []string
	if d == db.Postgres {
		rows, err := inst.DB.QueryContext(ctx, `SELECT table_name FROM information_schema.columns
			WHERE column_name = 'company_id' AND table_schema = current_schema()`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var n string
			if err := rows.Scan(&n); err != nil {
				t.Fatal(err)
			}
			tables = append(tables, n)
		}
		return tables
	}
	rows, err := inst.DB.QueryContext(ctx, `SELECT m.name FROM sqlite_master m JOIN pragma_table_info(m.name) c
		WHERE m.type = 'table' AND c.name = 'company_id'`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, n)
	}
	return tables
}

// TestRenameAndDeleteCompany: owners rename a company and delete it with
// its name typed back. The delete stops the company's work first (its
// inbox's socket closes, a running run is cancelled) and then no table
// holds a row of it; another company is untouched.
func TestRenameAndDeleteCompany(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, d db.Dialect, url string) {
		e := testkit.NewEmailEnv(t, url)
		cid := e.CompanyID
		path := "/api/companies/" + cid
		other := testkit.ID(e.Board.JSON("POST", "/api/companies", map[string]any{"name": "Other Co"}, 201))
		otherAgent := testkit.ID(e.Board.JSON("POST", "/api/companies/"+other+"/agents", map[string]any{"name": "Stays",
			"adapterType": "process", "adapterConfig": map[string]any{"command": "/bin/true"}}, 201))
		m := e.Board.JSON("POST", path+"/members", map[string]any{"email": "admin@example.com", "role": "admin"}, 201)
		admin := e.Board.As(e.Board.JSON("POST", path+"/board-keys", map[string]any{"userId": m["userId"]}, 201)["token"].(string), "")

		// Rename: owners only, the identifier prefix stays.
		if st, out := admin.Do("PATCH", path, map[string]any{"name": "Admin Co"}); st != 403 || !strings.Contains(string(out), "only owners") {
			t.Fatalf("an admin renames: %d %s", st, out)
		}
		if st, _ := e.Board.Do("PATCH", path, map[string]any{"name": "  "}); st != 400 {
			t.Fatalf("an empty name: %d", st)
		}
		if got := e.Board.JSON("PATCH", path, map[string]any{"name": "Renamed Co"}, 200); got["name"] != "Renamed Co" {
			t.Fatalf("rename: %v", got)
		}

		// Work in flight: a receiving inbox with a task from mail, and a
		// run that would go on for minutes.
		sum := e.Setup("doomed", nil)
		address := sum["address"].(string)
		testkit.Eventually(t, 30*time.Second, "a subscribed socket", func() bool { return e.Em.SubscribedCount(address) == 1 })
		if _, err := e.Em.Deliver(address, emulator.DeliverRequest{From: "jane@example.com", Subject: "Before the end", Text: "hello"}); err != nil {
			t.Fatal(err)
		}
		testkit.Eventually(t, 30*time.Second, "the email's task", func() bool { return len(e.Board.List(path+"/issues")) == 1 })
		sleeper := testkit.ID(e.Board.JSON("POST", path+"/agents", map[string]any{"name": "Sleeper", "adapterType": "process",
			"adapterConfig": map[string]any{"command": "/bin/sh", "args": []string{"-c", "sleep 300"}}}, 201))
		run := testkit.ID(e.Board.JSON("POST", "/api/agents/"+sleeper+"/wakeup", map[string]any{"reason": "manual"}, 202))
		testkit.Eventually(t, 30*time.Second, "the long run running", func() bool {
			return e.Board.JSON("GET", "/api/heartbeat-runs/"+run, nil, 200)["status"] == "running"
		})

		// Delete: owners only, with the name typed back exactly.
		if st, _ := admin.Do("DELETE", path, map[string]any{"confirmName": "Renamed Co"}); st != 403 {
			t.Fatalf("an admin deletes: %d", st)
		}
		for _, wrong := range []map[string]any{{"confirmName": "renamed co"}, {}} {
			if st, out := e.Board.Do("DELETE", path, wrong); st != 400 || !strings.Contains(string(out), "confirmName") {
				t.Fatalf("delete with %v: %d %s", wrong, st, out)
			}
		}
		if st, out := e.Board.Do("DELETE", path, map[string]any{"confirmName": "Renamed Co"}); st != 204 {
			t.Fatalf("delete: %d %s", st, out)
		}
		testkit.Eventually(t, 30*time.Second, "the inbox's socket closed", func() bool { return e.Em.SubscribedCount(address) == 0 })
		if st, _ := e.Board.Do("GET", path, nil); st != 404 {
			t.Fatalf("the deleted company answers %d", st)
		}
		ctx := context.Background()
		tables := companyTables(t, e.Instance, d)
		if len(tables) < 20 {
			t.Fatalf("only %d tables with company_id: %v", len(tables), tables)
		}
		for _, table := range tables {
			var n int
			if err := e.DB.QueryRowContext(ctx, `SELECT COUNT(*) FROM `+table+` WHERE company_id = $1`, cid).Scan(&n); err != nil {
				t.Fatalf("%s: %v", table, err)
			}
			if n != 0 {
				t.Errorf("%d rows of the deleted company remain in %s", n, table)
			}
		}
		if got := e.Board.JSON("GET", "/api/agents/"+otherAgent, nil, 200); got["status"] != "active" {
			t.Errorf("the other company's agent: %v", got["status"])
		}
		if !strings.Contains(e.Logs.String(), "company deleted") {
			t.Error("the server log does not record the delete")
		}
	})
}
