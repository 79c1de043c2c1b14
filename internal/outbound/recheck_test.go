package outbound_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/store"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// A check the worker cannot make is never taken for a verdict: when the
// database fails under a queued send's task lookup, suppression list or
// loop-guard setting, the send waits (state retry, outcome still queued,
// no provider call) and goes out with its guards once the database
// answers again. Before, the first case failed the send for good, and the
// other two sent it past the suppression list or without the loop-guard
// headers. The failures are real: the test renames the table or column
// the check reads.
func TestUncheckableSendsWaitInsteadOfFailing(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := newSendEnv(t, url)
		ctx := context.Background()
		exec := func(q string) {
			t.Helper()
			if _, err := e.DB.ExecContext(ctx, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		for _, tc := range []struct{ name, breakIt, repair string }{
			{"task lookup", `ALTER TABLE issues RENAME TO issues_away`, `ALTER TABLE issues_away RENAME TO issues`},
			{"suppression list", `ALTER TABLE email_suppressions RENAME TO email_suppressions_away`,
				`ALTER TABLE email_suppressions_away RENAME TO email_suppressions`},
			{"loop-guard setting", `ALTER TABLE email_endpoints RENAME COLUMN auto_submitted TO auto_submitted_away`,
				`ALTER TABLE email_endpoints RENAME COLUMN auto_submitted_away TO auto_submitted`},
		} {
			t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
				key := testkit.NewUUID()
				// Hold the thread so the send is queued but not yet run.
				lease, _, err := e.Store.TryLease(ctx, e.DB, e.CompanyID, e.endpoint, store.ThreadLeaseKey("pending:"+key), "test", time.Minute)
				if err != nil || lease == nil {
					t.Fatalf("hold the thread: %v %v", lease, err)
				}
				e.Board.JSON("POST", e.sendPath(), e.newEmail(key, "checked twice"), 202)
				exec(tc.breakIt)
				repaired := false
				defer func() {
					if !repaired {
						exec(tc.repair)
					}
				}()
				if err := lease.Release(ctx); err != nil {
					t.Fatal(err)
				}
				e.Outbound.Notify()
				testkit.Eventually(t, 30*time.Second, "the send to wait for a recheck", func() bool {
					p, err := e.Store.GetPublication(ctx, e.DB, key)
					return err == nil && p.State == "retry" && strings.Contains(p.Error, "checked again")
				})
				if p, _ := e.Store.GetPublication(ctx, e.DB, key); p.Outcome != "queued" || e.sendRequests(key) != 0 {
					t.Fatalf("while the check fails: outcome %s, %d provider calls", p.Outcome, e.sendRequests(key))
				}
				exec(tc.repair)
				repaired = true
				// The recheck is 5 s away; bring it forward rather than wait.
				p, err := e.Store.GetPublication(ctx, e.DB, key)
				if err != nil {
					t.Fatal(err)
				}
				now := e.Store.Now()
				if err := e.Store.SetPublicationState(ctx, e.DB, p.ID, domain.SendRetry, p.Error, &now); err != nil {
					t.Fatal(err)
				}
				e.Outbound.Notify()
				e.waitOutcome(key, "sent", "delivered")
				var found bool
				for _, m := range e.Em.Outbox("client@example.com", "") {
					if m.IdempotencyKey == key {
						found = true
						if m.Headers["Auto-Submitted"] != "auto-generated" || m.Headers["X-Auto-Response-Suppress"] != "All" {
							t.Fatalf("sent without its loop guards: %v", m.Headers)
						}
					}
				}
				if !found || e.sendRequests(key) != 1 {
					t.Fatalf("provider sends of %s: %d (in outbox: %v)", key, e.sendRequests(key), found)
				}
			})
		}
	})
}
