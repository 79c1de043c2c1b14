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
//   - keep every socket it runs, except one that a member's join made
//     that member's: when a renewal shows a member this process had not
//     seen (or had forgotten), each socket this process already runs whose
//     preferred owner is now that newcomer is marked for it, and handed
//     over (closed; the newcomer takes it on the release notification)
//     while the newcomer is under its cap and still the preferred owner.
//     Only a join marks a socket: a member dying changes the preferred
//     owner of sockets a survivor took in fallback (or kept while their
//     preferred owner was at its cap) to another survivor, and those stay
//     where they are. A socket taken in fallback is never handed back and
//     forth;
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
		o.absent = map[string]int{}
	}
	if r.Members != nil {
		o.members = r.Members
		newcomers := map[string]bool{}
		for _, m := range r.Members {
			if _, ok := o.firstSeen[m]; !ok {
				o.firstSeen[m] = now
				if m != w.o.Holder {
					newcomers[m] = true
				}
			}
		}
		if len(newcomers) > 0 {
			// Why the marks are set here, at the join, and not derived from
			// the member list at each renewal: after a death the list alone
			// cannot tell a socket whose preferred owner changed because
			// the dead member left (it stays) from one whose preferred
			// owner joined (it moves).
			for id, s := range w.sockets {
				if s.running && newcomers[preferredOwner(id, o.members)] {
					s.handTo, s.handMarked = preferredOwner(id, o.members), w.renewals.Load()
				}
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
		if s.handTo == "" {
			continue
		}
		to := s.handTo
		if !s.running || s.cancel == nil || s.handing || preferredOwner(id, o.members) != to ||
			w.renewals.Load()-s.handMarked > forgetAfterRounds {
			// Closed already, the newcomer left (or another newcomer is
			// preferred now, with its own mark), or the mark is stale.
			s.handTo = ""
			continue
		}
		if held[to] >= share {
			// The newcomer took its share: its join is complete, and this
			// socket stays here for good (a hand-over held back by the cap
			// must never happen later, when a death raises the cap).
			s.handTo = ""
			continue
		}
		// Counted so that this renewal hands the newer member no more
		// than its cap.
		held[to]++
		s.handTo = ""
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
