package inbound_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/emulator"
	"github.com/paperclipai/paperclipai/internal/store"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// A replica that did not set the inbox up takes over its socket within
// the short lease after the replica holding it is killed, and receives
// the next mail (issue 10: such a replica never picked the socket up).
func TestNonCreatorTakesOverAKilledSocket(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	c := newCluster(t, dbtest.PostgresURL(t))
	creator := c.start("")
	_, _, epID, address := c.seed(creator)
	st := c.openDB("")
	ctx := context.Background()
	testkit.Eventually(t, wait, "the creator's socket", func() bool {
		return c.em.SubscribedCount(address) == 1 && socketHolder(ctx, st, epID, []*runProc{creator}) == creator
	})
	other := c.start("")
	creator.kill()
	res, err := c.em.Deliver(address, emulator.DeliverRequest{From: "Jane <jane@example.com>", Subject: "After the kill", Text: "still there?"})
	if err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, wait, "the other replica's socket", func() bool {
		return c.em.SubscribedCount(address) == 1 && socketHolder(ctx, st, epID, []*runProc{other}) == other
	})
	testkit.Eventually(t, wait, "the mail processed", func() bool {
		var state string
		_ = st.DB.QueryRowContext(ctx, `SELECT state FROM email_deliveries WHERE endpoint_id = $1 AND deduplication_key = $2`,
			epID, "message.received:"+res.MessageID).Scan(&state)
		return state == "processed"
	})
}

// BenchmarkSocketFailover measures failover on PostgreSQL with three real
// replicas (`paperclipai run` processes) at production email timing: the
// replica holding the inbox's socket is killed with SIGKILL, a mail is
// delivered at once, and the figure is the time from the kill until that
// mail's delivery is processed (its task and wake recorded), by another
// replica that took the socket over. Five trials (PAPERCLIP_BENCH_TRIALS);
// the killed replica is replaced by a fresh one each time, so the inbox
// was set up by a replica that is gone after the first trial. Run it with
//
//	go test ./internal/inbound -run '^$' -bench SocketFailover -benchtime 1x
func BenchmarkSocketFailover(b *testing.B) {
	url := dbtest.PostgresURL(b)
	for range b.N {
		benchFailover(b, url)
	}
}

func benchFailover(b *testing.B, url string) {
	b.StopTimer()
	trials := envInt("PAPERCLIP_BENCH_TRIALS", 5)
	c := newCluster(b, url)
	// Production timing: the cluster's short test overrides are cleared.
	c.env = []string{"PAPERCLIP_EMAIL_LEASE_TTL=", "PAPERCLIP_EMAIL_RECONNECT_MIN=", "PAPERCLIP_EMAIL_CATCHUP_INTERVAL="}
	procs := []*runProc{c.start("")}
	_, _, epID, address := c.seed(procs[0])
	procs = append(procs, c.start(""), c.start(""))
	st := c.openDB("")
	ctx := context.Background()
	var took []float64
	for trial := range trials {
		var holder *runProc
		testkit.Eventually(b, 2*time.Minute, "one subscribed socket", func() bool {
			if c.em.SubscribedCount(address) != 1 || c.em.WebSocketCount() != 1 {
				return false
			}
			holder = socketHolder(ctx, st, epID, procs)
			return holder != nil
		})
		// Let the new holder's subscription catch-up finish, so the mail
		// below is not admitted by a scan that was already running.
		time.Sleep(500 * time.Millisecond)
		holder.kill()
		start := time.Now()
		res, err := c.em.Deliver(address, emulator.DeliverRequest{From: "Jane <jane@example.com>",
			Subject: fmt.Sprintf("Failover %d", trial), Text: "who takes over?"})
		if err != nil {
			b.Fatal(err)
		}
		key := "message.received:" + res.MessageID
		testkit.Eventually(b, 3*time.Minute, "the mail processed by another replica", func() bool {
			var state string
			err := st.DB.QueryRowContext(ctx, `SELECT state FROM email_deliveries WHERE endpoint_id = $1 AND deduplication_key = $2`,
				epID, key).Scan(&state)
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				b.Fatal(err)
			}
			return state == "processed"
		})
		d := time.Since(start)
		took = append(took, float64(d.Milliseconds()))
		b.Logf("trial %d: %v from SIGKILL of the socket holder to the mail's task", trial+1, d.Round(time.Millisecond))
		for i, p := range procs {
			if p == holder {
				procs[i] = c.start("")
			}
		}
	}
	slices.Sort(took)
	b.ReportMetric(took[len(took)/2], "p50-ms")
	b.ReportMetric(took[len(took)-1], "max-ms")
	b.ReportMetric(0, "ns/op")
}

// socketHolder returns the replica whose process holds the inbox's live
// socket lease (the holder name is "<host>:<pid>:<nonce>").
func socketHolder(ctx context.Context, st *store.Store, endpointID string, procs []*runProc) *runProc {
	var holder string
	if err := st.DB.QueryRowContext(ctx, `SELECT holder FROM email_leases WHERE endpoint_id = $1 AND lease_key = $2 AND expires_at > $3`,
		endpointID, store.LeaseKeySocket, st.Now()).Scan(&holder); err != nil {
		return nil
	}
	for _, p := range procs {
		select {
		case <-p.done:
			continue
		default:
		}
		if strings.Contains(holder, fmt.Sprintf(":%d:", p.cmd.Process.Pid)) {
			return p
		}
	}
	return nil
}
