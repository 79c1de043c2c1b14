package email_test

import (
	"context"
	"testing"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// A lookup the database cannot answer is a server error, never an answer
// of "no such connection" or "no such agent": an operator told 404 or 400
// would change a request that was right (docs/email-pipeline.md, "Who
// may send").
func TestUncheckableLookupsAreServerErrors(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := testkit.NewEmailEnv(t, url)
		conn := e.Board.JSON("POST", connectionsPath(e), map[string]any{"apiKey": e.OrgKey, "idempotencyKey": testkit.NewUUID()}, 201)
		connPath := connectionsPath(e) + "/" + testkit.ID(conn)
		exec := func(stmt string) {
			t.Helper()
			if _, err := e.DB.ExecContext(context.Background(), stmt); err != nil {
				t.Fatal(err)
			}
		}
		for _, tc := range []struct {
			name, breakIt, repair, method, path string
			body                                any
			want                                int
		}{
			{"connection read", `ALTER TABLE email_connections RENAME COLUMN name TO name_away`,
				`ALTER TABLE email_connections RENAME COLUMN name_away TO name`, "GET", connPath, nil, 200},
			{"agent check of an install", `ALTER TABLE agents RENAME COLUMN name TO name_away`,
				`ALTER TABLE agents RENAME COLUMN name_away TO name`, "POST", connPath + "/installs",
				map[string]any{"targetType": "agent", "targetId": e.AgentID}, 201},
		} {
			t.Run(tc.name, func(t *testing.T) {
				exec(tc.breakIt)
				status, body := e.Board.Do(tc.method, tc.path, tc.body)
				exec(tc.repair)
				if status != 500 {
					t.Fatalf("%s with the table broken: status %d (%s), want 500", tc.name, status, body)
				}
				if status, body := e.Board.Do(tc.method, tc.path, tc.body); status != tc.want {
					t.Fatalf("%s once repaired: status %d (%s), want %d", tc.name, status, body, tc.want)
				}
			})
		}
	})
}
