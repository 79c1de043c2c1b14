package inbound_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/store"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// Sockets spread over the replicas and keep their owner (docs/architecture.md,
// "Inbound email", stable socket ownership), checked with counts, not wall time: with
// three replicas and 30 inboxes each holds at most its share plus the
// slack (ceil(30/3) + 1 + 2 %); after a SIGKILL every inbox is owned again
// by a survivor within a bounded number of the survivors' lease renewals,
// no survivor lost (or re-took) an inbox it held, survivors handed nothing
// over, and their takeovers equal the dead replica's sockets; the
// survivors then stay within the two-replica bound; after a fresh replica
// joins, sockets move to it until the three-replica bound holds again.
func TestSocketsSpreadOverReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	const inboxes = 30
	bound := func(replicas int) int { return (inboxes+replicas-1)/replicas + 1 + inboxes/50 }
	c := newCluster(t, dbtest.PostgresURL(t))
	procs := []*runProc{c.start(""), c.start(""), c.start("")}
	t.Cleanup(func() {
		if t.Failed() {
			logHandOvers(t, procs)
		}
	})
	b := testkit.NewClient(t, procs[0].url)
	b.JSON("PATCH", "/api/instance/settings", map[string]any{"experimental": map[string]any{"enableChatConnectors": true}}, 200)
	companyID := testkit.ID(b.JSON("POST", "/api/companies", map[string]any{"name": "Spread Co"}, 201))
	agentID := testkit.ID(b.JSON("POST", "/api/companies/"+companyID+"/agents", map[string]any{"name": "Mail Agent",
		"adapterType": "process", "adapterConfig": map[string]any{"command": "/bin/true"}}, 201))
	_, key := c.em.CreateOrganization("Spread Mail")
	addresses := make([]string, inboxes)
	eightAtATime(inboxes, func(i int) {
		sum := b.JSON("POST", "/api/companies/"+companyID+"/email/inboxes", map[string]any{"assignedAgentId": agentID,
			"apiKey": key, "username": fmt.Sprintf("spread%02d", i), "idempotencyKey": testkit.NewUUID()}, 201)
		addresses[i] = sum["address"].(string)
	})
	st := c.openDB("")
	// spread reports whether every inbox has one subscribed socket, held
	// by a live replica, with at most bound(len(live)) per replica (and,
	// with need, at least one on that replica).
	spread := func(live []*runProc, need *runProc) bool {
		for _, a := range addresses {
			if c.em.SubscribedCount(a) != 1 {
				return false
			}
		}
		per := map[int]int{}
		for _, o := range socketOwnersByLease(t, st) {
			per[o.pid]++
		}
		total := 0
		for _, p := range live {
			n := per[p.cmd.Process.Pid]
			if n > bound(len(live)) {
				return false
			}
			total += n
		}
		return total == inboxes && (need == nil || per[need.cmd.Process.Pid] > 0)
	}
	testkit.Eventually(t, wait, "30 sockets over 3 replicas, within the share bound", func() bool { return spread(procs, nil) })
	// Spread within the bound is not yet settled: a replica may still hand
	// an inbox to its preferred owner that joined later. Settled means no
	// move in three renewals of every replica; only then is "a survivor
	// never loses an inbox it held" a property of the kill.
	settled := func() bool {
		in0, out0 := movesOf(t, procs)
		r0 := map[*runProc]float64{}
		for _, p := range procs {
			r0[p] = scrapeMetric(t, p, "paperclip_email_lease_renewals_total")
		}
		testkit.Eventually(t, wait, "three renewals of every replica", func() bool {
			for _, p := range procs {
				if scrapeMetric(t, p, "paperclip_email_lease_renewals_total")-r0[p] < 3 {
					return false
				}
			}
			return true
		})
		in1, out1 := movesOf(t, procs)
		return in1 == in0 && out1 == out0 && spread(procs, nil)
	}
	testkit.Eventually(t, wait, "the spread settled (no socket moved in three renewals)", settled)

	before := socketOwnersByLease(t, st)
	victim, survivors := procs[0], procs[1:]
	held := 0
	for _, o := range before {
		if o.pid == victim.cmd.Process.Pid {
			held++
		}
	}
	renewals0 := map[*runProc]float64{}
	for _, p := range survivors {
		renewals0[p] = scrapeMetric(t, p, "paperclip_email_lease_renewals_total")
	}
	movedIn0, movedOut0 := movesOf(t, survivors)
	victim.kill()
	// kept fails for inboxes a survivor no longer holds, under the same
	// lease token, though it held them before the kill. Stable ownership
	// means none. Three causes are fixed: a hand-over derived from the
	// member list after a death (TestOnlyAJoinHandsASocketOver), a socket
	// handed again at each renewal while it closed, and concurrent
	// takeovers of the dead replica's inboxes that took a survivor over
	// its cap, so it shed one of its own sockets
	// (TestSocketTriesCountAgainstTheShareCap). On failure the replicas'
	// hand-over lines are logged.
	lost := map[string]bool{}
	kept := func(now map[string]leaseOwner) {
		t.Helper()
		for id, o := range before {
			if o.pid == victim.cmd.Process.Pid || lost[id] {
				continue
			}
			if cur, ok := now[id]; ok && cur != o && cur.pid != 0 {
				lost[id] = true
				t.Errorf("inbox %s: survivor pid %d lost its socket lease (now %+v)", id, o.pid, cur)
			}
		}
	}
	testkit.Eventually(t, wait, "every inbox owned by a survivor", func() bool {
		now := socketOwnersByLease(t, st)
		kept(now)
		if len(now) != inboxes {
			return false
		}
		for _, o := range now {
			if o.pid == victim.cmd.Process.Pid {
				return false
			}
		}
		return true
	})
	// The victim's leases lapse after the lease TTL, 3 renewal periods
	// (3 s / 1 s); a survivor takes an inbox it is preferred for at the
	// renewal that finds the lease free, and one beyond its cap falls to
	// the other after two more. A survivor slowed by a loaded machine
	// renews less often, never more, so the bound holds under load.
	const maxRenewals = 3 + 1 + 2 + 4
	for _, p := range survivors {
		n := scrapeMetric(t, p, "paperclip_email_lease_renewals_total") - renewals0[p]
		t.Logf("survivor pid %d: %v renewals from the kill until every inbox was owned again", p.cmd.Process.Pid, n)
		if n > maxRenewals {
			t.Errorf("survivor pid %d took %v renewals to own every inbox again, want at most %d", p.cmd.Process.Pid, n, maxRenewals)
		}
	}
	testkit.Eventually(t, wait, "30 sockets over the 2 survivors, within the share bound", func() bool { return spread(survivors, nil) })
	kept(socketOwnersByLease(t, st))
	movedIn1, movedOut1 := movesOf(t, survivors)
	t.Logf("the victim held %d sockets; survivors took over %v and handed over %v", held, movedIn1-movedIn0, movedOut1-movedOut0)
	if movedOut1 != movedOut0 || movedIn1-movedIn0 != float64(held) {
		t.Errorf("survivors handed %v sockets over after a kill (want 0) and took over %v (the victim held %d)",
			movedOut1-movedOut0, movedIn1-movedIn0, held)
	}

	fresh := c.start("")
	procs = []*runProc{survivors[0], survivors[1], fresh}
	testkit.Eventually(t, wait, "sockets moved to the fresh replica", func() bool { return spread(procs, fresh) })
}

// logHandOvers logs the replicas' hand-over and lease-loss lines.
func logHandOvers(t testing.TB, procs []*runProc) {
	for _, p := range procs {
		for _, l := range strings.Split(p.logs.String(), "\n") {
			if strings.Contains(l, "handing") || strings.Contains(l, "lease lost") || strings.Contains(l, "renew socket") {
				t.Logf("pid %d: %s", p.cmd.Process.Pid, l)
			}
		}
	}
}

// leaseOwner is the process holding an inbox's socket lease, and the
// lease's token (a new token means the socket was taken again).
type leaseOwner struct {
	pid   int
	token string
}

// socketOwnersByLease maps each inbox with a live socket lease to its
// holder's process id (the holder name is host:pid:suffix) and token.
func socketOwnersByLease(t testing.TB, st *store.Store) map[string]leaseOwner {
	t.Helper()
	rows, err := st.DB.QueryContext(context.Background(), `SELECT endpoint_id, holder, token FROM email_leases WHERE lease_key = $1 AND expires_at > $2`,
		store.LeaseKeySocket, st.Now())
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]leaseOwner{}
	for rows.Next() {
		var id, h, token string
		if err := rows.Scan(&id, &h, &token); err != nil {
			t.Fatal(err)
		}
		var pid int
		if parts := strings.Split(h, ":"); len(parts) >= 3 {
			_, _ = fmt.Sscan(parts[len(parts)-2], &pid)
		}
		out[id] = leaseOwner{pid: pid, token: token}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// movesOf sums paperclip_email_socket_moves_total over procs, by direction.
func movesOf(t testing.TB, procs []*runProc) (in, out float64) {
	t.Helper()
	for _, p := range procs {
		in += scrapeMetric(t, p, `paperclip_email_socket_moves_total{direction="in"}`)
		out += scrapeMetric(t, p, `paperclip_email_socket_moves_total{direction="out"}`)
	}
	return in, out
}

// scrapeMetric reads one sample (name with its labels, as exposed) from
// the replica's /metrics; a missing sample fails the test.
func scrapeMetric(t testing.TB, p *runProc, sample string) float64 {
	t.Helper()
	resp, err := http.Get(p.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), sample+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("metric %s: %v", sample, err)
			}
			return f
		}
	}
	t.Fatalf("/metrics of pid %d has no %s", p.cmd.Process.Pid, sample)
	return 0
}
