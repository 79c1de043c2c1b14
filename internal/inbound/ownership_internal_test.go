package inbound

import (
	"fmt"
	"testing"
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
