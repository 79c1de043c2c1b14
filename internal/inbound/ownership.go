package inbound

import (
	"slices"
	"time"

	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/store"
)

// ownership is which replica runs which inbox's socket, as this process
// sees it (docs/architecture.md, "Inbound email", the stable socket ownership item). Every replica
// ranks the live members for an inbox by a rendezvous (highest random
// weight) hash of the inbox id and the member's holder name; the top
// member is the inbox's preferred owner. Because the ranking of two
// members never depends on a third, a member leaving changes the preferred
// owner only of its own inboxes, and a member joining only of the inboxes
// it now ranks first: a membership change moves only the dead or the new
// replica's share. The share cap (socketShareLocked) stays the bound, so
// an unlucky hash never piles more than a share plus the slack on one
// replica.
//
// The rules, applied by each replica for itself:
//   - take a free inbox at once when it is the preferred owner, or when
//     the inbox has been seen free at two batch renewals in a row (the
//     preferred owner is not taking it: at its cap, just started, or not
//     aware of the inbox yet), in both cases only under its cap;
//   - keep every socket it runs, except one whose preferred owner is a
//     member that joined after the socket started and that is under its
//     cap: that one is handed over (closed; the preferred owner takes it
//     on the release notification). A member dying therefore moves
//     nothing a survivor holds, and a socket taken in fallback is never
//     handed back and forth;
//   - over its cap (a replica joined), close the sockets that prefer
//     another member first.
//
// All fields are guarded by Worker.mu.
type ownership struct {
	// members are the live replicas' holder names, this one included,
	// sorted, from the last batch renewal; nil before the first one and on
	// an exclusive database.
	members []string
	// firstSeen is when this process first saw each member.
	firstSeen map[string]time.Time
	// freeRounds counts, per inbox this process does not run, the batch
	// renewals in a row that found its socket lease free.
	freeRounds map[string]int
	// lastHolder is the other process last seen holding each inbox's
	// socket, so a takeover can be counted as a move.
	lastHolder map[string]string
	// joined holds the members whose join is complete: seen at or over
	// their cap while a hand-over to them waited. No socket is handed to
	// them any more, so a hand-over held back by the cap never happens
	// later, when another member's death raises the cap (that would move
	// a survivor's inbox on a death).
	joined map[string]bool
	// absent counts, per member seen before, the renewals in a row whose
	// member list lacked it.
	absent map[string]int
}

// forgetAfterRounds is how many renewals in a row a member must be missing
// before this process forgets when it first saw it.
const forgetAfterRounds = 16

// fallbackRounds is how many batch renewals in a row must find an inbox's
// socket free before a replica other than its preferred owner takes it.
const fallbackRounds = 2

// rendezvousWeight is the rendezvous hash weight of member for inbox:
// FNV-1a of both names, then a 64-bit finalizer (splitmix64) so that
// holder names differing only in their last bytes still rank
// independently.
func rendezvousWeight(inbox, member string) uint64 {
	// FNV-1a inline: no allocation per call (it runs per socket and member
	// at every renewal).
	const prime = 1099511628211
	x := uint64(14695981039346656037)
	for i := 0; i < len(inbox); i++ {
		x = (x ^ uint64(inbox[i])) * prime
	}
	x = (x ^ 0) * prime
	for i := 0; i < len(member); i++ {
		x = (x ^ uint64(member[i])) * prime
	}
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// preferredOwner is the member with the highest rendezvous weight for
// inbox ("" without members); ties (practically impossible) go to the
// smaller name so every replica agrees.
func preferredOwner(inbox string, members []string) string {
	best, bestW := "", uint64(0)
	for _, m := range members {
		w := rendezvousWeight(inbox, m)
		if best == "" || w > bestW || (w == bestW && m < best) {
			best, bestW = m, w
		}
	}
	return best
}

// mayTakeLocked reports whether this process may try to take the free
// socket lease of inbox id (the cap is checked by the caller). The
// caller holds w.mu.
func (w *Worker) mayTakeLocked(id string) bool {
	if w.o.ExclusiveDatabase || len(w.own.members) == 0 {
		// Alone, or membership not known yet (before the first renewal):
		// the cap and the hand-over rules settle it afterwards.
		return true
	}
	return preferredOwner(id, w.own.members) == w.o.Holder || w.own.freeRounds[id] >= fallbackRounds
}

// takenOverLocked records that this process took inbox id's socket and
// reports whether another process held it before (a move). The caller
// holds w.mu.
func (w *Worker) takenOverLocked(id string) bool {
	prev := w.own.lastHolder[id]
	delete(w.own.lastHolder, id)
	delete(w.own.freeRounds, id)
	return prev != "" && prev != w.o.Holder
}

// learnOwnership records what a batch renewal said about the members and
// the other processes' sockets (candidates: the inboxes whose socket this
// process did not run, asked about in that renewal) and returns the
// inboxes this process should hand over to a newer preferred owner.
func (w *Worker) learnOwnership(r store.LeaseRenewal, candidates []string, now time.Time) (handOver []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	o := &w.own
	if o.firstSeen == nil {
		o.firstSeen, o.freeRounds, o.lastHolder = map[string]time.Time{}, map[string]int{}, map[string]string{}
		o.joined, o.absent = map[string]bool{}, map[string]int{}
	}
	if r.Members != nil {
		o.members = r.Members
		for _, m := range r.Members {
			if _, ok := o.firstSeen[m]; !ok {
				o.firstSeen[m] = now
			}
		}
		for m := range o.firstSeen {
			// A member missing from one renewal's list (its membership row
			// renewed late under load) is not new when it shows again:
			// forgetting it would make every socket look older than its
			// "join" and hand sockets to it. A restarted replica has a new
			// holder name, so only long-gone members are forgotten.
			if slices.Contains(r.Members, m) {
				delete(o.absent, m)
				continue
			}
			if o.absent[m]++; o.absent[m] > forgetAfterRounds {
				delete(o.firstSeen, m)
				delete(o.joined, m)
				delete(o.absent, m)
			}
		}
	}
	if r.Live == nil {
		return nil
	}
	held := map[string]int{}
	for id, h := range r.Live {
		held[h]++
		o.lastHolder[id] = h
	}
	asked := make(map[string]bool, len(candidates))
	for _, id := range candidates {
		asked[id] = true
		if r.Live[id] == "" {
			o.freeRounds[id]++
		} else {
			delete(o.freeRounds, id)
		}
	}
	for id := range o.freeRounds {
		if !asked[id] {
			delete(o.freeRounds, id)
		}
	}
	for id := range o.lastHolder {
		if w.inboxes[id] == nil {
			delete(o.lastHolder, id)
		}
	}
	share := w.socketShareLocked()
	if share == 0 {
		return nil
	}
	for id, s := range w.sockets {
		if !s.running || s.cancel == nil {
			continue
		}
		to := preferredOwner(id, o.members)
		if to == w.o.Holder || to == "" {
			continue
		}
		seen, ok := o.firstSeen[to]
		if !ok || !seen.After(s.started) || o.joined[to] {
			continue
		}
		if held[to] >= share {
			o.joined[to] = true
			continue
		}
		// Counted so that this renewal hands the newer member no more
		// than its cap.
		held[to]++
		handOver = append(handOver, id)
	}
	return handOver
}

// shareLocked returns the active WebSocket inboxes, their fair share per
// live replica (rounded up) and the cap (socketShareLocked; the total on
// a single replica). The caller holds w.mu.
func (w *Worker) shareLocked() (total, fair, bound int) {
	for _, st := range w.inboxes {
		if st.ep.ReceiveMode == domain.ReceiveWebSocket && st.refused == nil {
			total++
		}
	}
	n := max(1, int(w.replicas.Load()))
	fair = (total + n - 1) / n
	bound = w.socketShareLocked()
	if bound == 0 {
		bound = total
	}
	return total, fair, bound
}

// SocketShare reports this process's sockets held (running under their
// lease), its fair share of the active WebSocket inboxes (divided among
// the live replicas, rounded up) and its cap (fair share plus the slack);
// the per-replica balance gauges.
func (w *Worker) SocketShare() (held, fair, bound int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, s := range w.sockets {
		if s.running {
			held++
		}
	}
	_, fair, bound = w.shareLocked()
	return held, fair, bound
}

// LiveReplicas returns the number of live replicas the last batch
// renewal counted, this one included.
func (w *Worker) LiveReplicas() int { return max(1, int(w.replicas.Load())) }

// Renewals returns how many batch lease renewals this process completed:
// tests count idle statements and failover per renewal period with it.
func (w *Worker) Renewals() int64 { return w.renewals.Load() }
