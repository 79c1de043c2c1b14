package inbound

import (
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/store"
)

// Rendezvous hashing moves only the changed member's inboxes: removing a
// member reassigns exactly the inboxes it was preferred for, adding one
// moves inboxes only to the newcomer, and every replica computes the same
// owner whatever the order of the member list.
func TestPreferredOwnerMovesOnlyTheChangedShare(t *testing.T) {
	inboxes := make([]string, 3000)
	for i := range inboxes {
		inboxes[i] = fmt.Sprintf("0193e0c4-%04d-7000-8000-%012d", i%10000, i)
	}
	three := []string{"host-a:101:1a2b3c4d", "host-b:202:5e6f7a8b", "host-c:303:9c0d1e2f"}
	owner := func(members []string) map[string]string {
		out := map[string]string{}
		for _, id := range inboxes {
			out[id] = preferredOwner(id, members)
		}
		return out
	}
	before := owner(three)
	per := map[string]int{}
	for _, m := range before {
		per[m]++
	}
	for _, m := range three {
		// 1,000 expected each; the hash must spread, not be exact.
		if per[m] < 850 || per[m] > 1150 {
			t.Fatalf("unbalanced rendezvous spread: %v", per)
		}
	}
	reversed := []string{three[2], three[1], three[0]}
	for id, m := range owner(reversed) {
		if before[id] != m {
			t.Fatalf("owner of %s depends on member order", id)
		}
	}
	// The second member dies: only its inboxes move.
	after := owner([]string{three[0], three[2]})
	for id, m := range before {
		if m != three[1] && after[id] != m {
			t.Fatalf("inbox %s moved from survivor %s to %s", id, m, after[id])
		}
	}
	// A fourth member joins: inboxes move only to it.
	joined := owner(append(append([]string{}, three...), "host-d:404:3a4b5c6d"))
	moved := 0
	for id, m := range before {
		if joined[id] != m {
			if joined[id] != "host-d:404:3a4b5c6d" {
				t.Fatalf("inbox %s moved between old members", id)
			}
			moved++
		}
	}
	if moved < 600 || moved > 900 {
		t.Fatalf("%d of 3000 inboxes moved to the fourth member, want about 750", moved)
	}
}

// A member's death moves nothing a survivor holds, even a socket whose
// preferred owner the death changes to the other survivor; a member's
// join moves to it the sockets it is now preferred for (counts of
// hand-overs, no timing). The first case is the survivor-to-survivor
// hand-over TestSocketsSpreadOverReplicas saw after a SIGKILL: a socket
// kept by A while its preferred owner V was at its cap became B's
// preferred socket when V died, and B, first seen after the socket
// started, looked like a newcomer to hand it to.
func TestOnlyAJoinHandsASocketOver(t *testing.T) {
	const a, b, v, c = "host:1:a", "host:2:b", "host:3:v", "host:4:c"
	find := func(want func(id string) bool) string {
		for i := range 100000 {
			if id := fmt.Sprintf("inbox-%d", i); want(id) {
				return id
			}
		}
		t.Fatal("no such inbox id")
		return ""
	}
	// x prefers v of the three, and b once v is gone (b also among a, b, c);
	// z prefers a until c joins.
	x := find(func(id string) bool {
		return preferredOwner(id, []string{a, b, v}) == v && preferredOwner(id, []string{a, b}) == b &&
			preferredOwner(id, []string{a, b, c}) == b
	})
	z := find(func(id string) bool {
		return preferredOwner(id, []string{a, b, v}) == a && preferredOwner(id, []string{a, b}) == a &&
			preferredOwner(id, []string{a, b, c}) == c
	})
	w := &Worker{o: Options{Holder: a}, sockets: map[string]*socketState{}, inboxes: map[string]*inboxState{}}
	for i := range 30 {
		id := fmt.Sprintf("other-%d", i)
		if i == 0 {
			id = x
		} else if i == 1 {
			id = z
		}
		w.inboxes[id] = &inboxState{ep: domain.EmailEndpoint{ID: id, ReceiveMode: domain.ReceiveWebSocket}}
	}
	started := time.Now()
	for _, id := range []string{x, z} {
		w.sockets[id] = &socketState{running: true, cancel: func() {}, started: started}
	}
	renew := func(members []string, live map[string]string) []string {
		t.Helper()
		w.renewals.Add(1)
		w.replicas.Store(int64(len(members)))
		return w.learnOwnership(store.LeaseRenewal{Members: members, Live: live, Replicas: len(members)}, nil, time.Now())
	}
	// The three members seen at once, after a's sockets started; v is at
	// its cap (11 of 30 over three), so x stays with a.
	live := map[string]string{}
	for i := range 11 {
		live[fmt.Sprintf("v-%d", i)] = v
	}
	for i := range 5 {
		live[fmt.Sprintf("b-%d", i)] = b
	}
	if got := renew([]string{a, b, v}, live); len(got) != 0 {
		t.Fatalf("handed %v to a member at its cap", got)
	}
	// v dies: x now prefers b, which is far under the two-member cap.
	for range 3 {
		if got := renew([]string{a, b}, map[string]string{"b-0": b}); len(got) != 0 {
			t.Fatalf("a member's death handed survivor a's sockets %v to the other survivor", got)
		}
	}
	// c joins: z, which now prefers c, moves to it; x does not.
	got := renew([]string{a, b, c}, map[string]string{"b-0": b})
	if len(got) != 1 || got[0] != z {
		t.Fatalf("a join handed over %v, want only %s", got, z)
	}
}

// A lease being tried holds a slot of the share cap: concurrent visits of
// a round (a dead replica's inboxes, all woken at once) can never take a
// survivor over its cap, which would make it shed a socket it held before
// the death at its next renewal (counts, no timing).
func TestSocketTriesCountAgainstTheShareCap(t *testing.T) {
	w := &Worker{o: Options{Holder: "host:1:a"}, sockets: map[string]*socketState{}, inboxes: map[string]*inboxState{}}
	for i := range 30 {
		id := fmt.Sprintf("inbox-%d", i)
		w.inboxes[id] = &inboxState{ep: domain.EmailEndpoint{ID: id, ReceiveMode: domain.ReceiveWebSocket}}
	}
	w.replicas.Store(2)
	share := w.socketShareLocked() // ceil(30/2) + 1 + 0
	if share != 16 {
		t.Fatalf("share cap %d, want 16", share)
	}
	for i := range share - 2 {
		w.sockets[fmt.Sprintf("inbox-%d", i)] = &socketState{running: true, cancel: func() {}}
	}
	tries := []*socketState{{}, {}, {}, {}}
	for i, s := range tries {
		w.sockets[fmt.Sprintf("inbox-%d", 20+i)] = s
	}
	reserved := 0
	for _, s := range tries {
		if w.reserveSocketSlotLocked(s) {
			reserved++
		}
	}
	if reserved != 2 {
		t.Fatalf("%d concurrent tries reserved with 2 slots left under the cap", reserved)
	}
	if w.reserveSocketSlotLocked(tries[0]) {
		t.Fatal("a second try of the same lease reserved a slot")
	}
	// The first try found the lease held elsewhere: its slot is free again.
	tries[0].taking = false
	if !w.reserveSocketSlotLocked(tries[2]) {
		t.Fatal("a slot freed by a failed try was not reserved again")
	}
}

// A renewal that did not renew a socket's lease closes that socket as
// lost, unless the socket was taken after the renewal began: its lease
// may have committed after the renewal's snapshot (counts, no timing).
func TestASocketTakenDuringARenewalIsNotLost(t *testing.T) {
	w := &Worker{o: Options{Holder: "host:1:a"}, sockets: map[string]*socketState{}, inboxes: map[string]*inboxState{},
		log: slog.New(slog.DiscardHandler)}
	began := time.Now()
	closed := map[string]bool{}
	add := func(id string, started time.Time) {
		w.sockets[id] = &socketState{running: true, started: started, lease: &store.Lease{Token: "tok-" + id},
			cancel: func() { closed[id] = true }}
	}
	add("old-renewed", began.Add(-time.Minute))
	add("old-missing", began.Add(-time.Minute))
	add("new-missing", began.Add(time.Millisecond))
	w.closeSocketsLost(map[string]bool{"tok-old-renewed": true}, began)
	if !closed["old-missing"] || closed["old-renewed"] || closed["new-missing"] {
		t.Fatalf("closed %v, want only old-missing", closed)
	}
}
