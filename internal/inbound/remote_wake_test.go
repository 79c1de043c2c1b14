package inbound_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/config"
	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/emulator"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// Mail admitted by one replica is received by that replica: the others,
// told by the admission's NOTIFY, leave its deliveries alone for a grace
// period instead of each reading the same due rows, fetching the same
// messages and contending for the same thread leases on every admission
// (what kept a three-replica cluster from keeping up with 50 emails/s to
// one inbox, docs/benchmarks.md, issue 34). Counted, not timed: over a
// burst of new-thread mail to one inbox of a three-replica PostgreSQL
// cluster, each replica that does not hold the socket issues at most one
// statement per lease renewal plus a small constant (a grace visit or
// two), where it used to issue one batch or more per admission. On SQLite
// (one server) the same burst is simply received.
func TestOtherReplicasLeaveAnAdmissionToItsReplica(t *testing.T) {
	const mails = 40
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		lease := func(c *config.Config) { c.EmailLeaseTTL = 3 * time.Second }
		e := testkit.NewEmailEnv(t, url, lease)
		replicas := withReplicas(t, e, url, lease)
		inbox := e.Setup("burst", nil)
		id, address := inbox["id"].(string), inbox["address"].(string)
		holder := -1
		testkit.Eventually(t, wait, "the inbox's socket caught up on one replica", func() bool {
			holder = -1
			for i, r := range replicas {
				if r.Inbound.SocketCaughtUp(id) {
					if holder >= 0 {
						return false
					}
					holder = i
				}
			}
			return holder >= 0
		})
		// Past the catch-up's batched record.
		time.Sleep(3 * time.Second)
		q0 := make([]int64, len(replicas))
		r0 := make([]int64, len(replicas))
		for i, r := range replicas {
			q0[i], r0[i] = r.Inbound.Queries(), r.Inbound.Renewals()
		}
		for i := range mails {
			e.Deliver(t, address, emulator.DeliverRequest{From: fmt.Sprintf("sender%d@example.com", i),
				Subject: fmt.Sprintf("New thread %d", i), Text: "one of a burst"})
			// Spaced, so that each admission's notification is its own
			// wake on the other replicas rather than one coalesced visit.
			time.Sleep(25 * time.Millisecond)
		}
		testkit.Eventually(t, wait, fmt.Sprintf("%d settled deliveries", mails), func() bool {
			ds := e.Deliveries(t, id)
			return len(ds) == mails && testkit.Settled(ds)
		})
		for i, r := range replicas {
			if i == holder {
				continue
			}
			stmts, renewed := r.Inbound.Queries()-q0[i], r.Inbound.Renewals()-r0[i]
			t.Logf("replica %d (not the socket's): %d statements over %d renewals while %d mails were received", i, stmts, renewed, mails)
			if slack := int64(8); stmts > renewed+slack {
				t.Errorf("replica %d issued %d statements over %d renewals while another replica received %d mails, want at most one per renewal plus %d",
					i, stmts, renewed, mails, slack)
			}
		}
	})
}
