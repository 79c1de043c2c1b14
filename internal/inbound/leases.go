package inbound

import (
	"context"
	"slices"
	"time"

	"github.com/paperclipai/paperclipai/internal/domain"
)

// renewLoop renews every receiving lease of this process (sockets,
// catch-up scans, thread leases) in one statement per SocketRenew, closes
// each socket whose lease was lost and, on a shared database, learns in
// the same statement which sockets other processes hold, to take over
// the rest: a replica that died leaves its leases to lapse within
// SocketLeaseTTL, and this is how the others notice without polling each
// lease. The statement runs only while this process holds a lease or
// knows an inbox whose socket it does not run.
func (w *Worker) renewLoop(ctx context.Context) {
	defer w.wg.Done()
	t := time.NewTicker(w.t.SocketRenew)
	defer t.Stop()
	lastOK := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if w.stopping.Load() {
			return
		}
		candidates := w.orphanCandidates()
		running := w.runningSockets()
		if running == 0 && w.workLeases.Load() == 0 && len(candidates) == 0 {
			lastOK = time.Now()
			continue
		}
		began := time.Now()
		callCtx, cancel := ctx, context.CancelFunc(func() {})
		if running > 0 && !w.o.ExclusiveDatabase {
			// Why a deadline: the socket leases of the last good renewal
			// lapse at lastOK+TTL, and another replica may take them over
			// then. A renewal still unanswered a renewal period before that
			// (a slow or stuck database, a starved process) must end, so
			// the branch below closes the sockets while they are still
			// ours, instead of two replicas holding one inbox's socket. On
			// an exclusive database (SQLite) no other process can take
			// them, and a slow renewal keeps the sockets.
			callCtx, cancel = context.WithDeadline(ctx, lastOK.Add(w.t.SocketLeaseTTL-w.t.SocketRenew))
		}
		r, err := w.st.RenewHolderLeases(callCtx, w.q, w.o.Holder, w.t.SocketLeaseTTL, w.t.ThreadLeaseTTL, w.t.SocketRenew, len(candidates) > 0)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			if time.Since(lastOK)+w.t.SocketRenew >= w.t.SocketLeaseTTL {
				// The leases lapse before the next try: another replica may
				// take the sockets then, and two must never overlap.
				w.log.Warn("renew socket leases", "err", err)
				w.closeSocketsExcept(nil)
			} else {
				w.log.Warn("renew socket leases; retrying", "err", err)
			}
			continue
		}
		// The renewed leases run from the statement's own time, which is
		// after began: counting from began is on the safe side.
		lastOK = began
		w.m.Renewals.Inc()
		w.renewals.Add(1)
		for _, token := range w.closeSocketsLost(r.Sockets, began) {
			// Renewed but not run here (its release failed): give it back.
			if err := w.st.ReleaseSocketToken(ctx, w.q, token); err != nil {
				w.log.Warn("release a stray socket lease", "err", err)
			}
		}
		w.replicas.Store(int64(r.Replicas))
		for _, id := range w.learnOwnership(r, candidates, began) {
			w.handOver(id, "handing a socket to its preferred replica, which joined later")
		}
		w.shedSockets()
		if r.Live != nil {
			w.mu.Lock()
			w.elsewhere = r.Live
			w.mu.Unlock()
			for _, id := range candidates {
				if r.Live[id] == "" {
					w.wakeFor(id, wakeSocket)
				}
			}
		}
	}
}

// socketShare is the most sockets this process may run: the active
// WebSocket inboxes divided among the live replicas (rounded up) plus a
// slack of one and 2 %, so sockets spread over the replicas, and move to a
// replica that (re)started. Zero means no limit (a single replica). The
// caller holds w.mu.
func (w *Worker) socketShareLocked() int {
	n := int(w.replicas.Load())
	if n <= 1 {
		return 0
	}
	total := 0
	for _, st := range w.inboxes {
		if st.ep.ReceiveMode == domain.ReceiveWebSocket && st.refused == nil {
			total++
		}
	}
	return (total+n-1)/n + 1 + total/50
}

// shedSockets closes the sockets this process runs beyond its share (a
// replica joined, or came back after a restart), those whose preferred
// owner is another replica first (ownership.go); the replicas under their
// share take them over at their next renewal. The inbox's subscription
// catch-up on the new holder admits what arrived in between.
func (w *Worker) shedSockets() {
	w.mu.Lock()
	share := w.socketShareLocked()
	if share == 0 {
		w.mu.Unlock()
		return
	}
	var mine, others []string
	for id, s := range w.sockets {
		if !s.running || s.cancel == nil || s.handing {
			continue
		}
		if len(w.own.members) > 0 && preferredOwner(id, w.own.members) == w.o.Holder {
			mine = append(mine, id)
		} else {
			others = append(others, id)
		}
	}
	// Newest first within each group: a socket taken a moment ago moves
	// with less lost than one held for long (and a survivor's sockets
	// from before a death are the last to go).
	newest := func(a, b string) int { return w.sockets[b].started.Compare(w.sockets[a].started) }
	slices.SortFunc(mine, newest)
	slices.SortFunc(others, newest)
	w.mu.Unlock()
	excess := len(mine) + len(others) - share
	for _, id := range append(others, mine...) {
		if excess <= 0 {
			return
		}
		w.handOver(id, "handing a socket to a replica under its share")
		excess--
	}
}

// handOver closes this process's socket of inbox id so another replica
// takes it (socketEnded releases the lease and signals the others, naming
// the inbox), and counts the move.
func (w *Worker) handOver(id, why string) {
	w.mu.Lock()
	s := w.sockets[id]
	// Why handing: closing a stream waits for the close handshake, so a
	// socket handed over runs on for a few renewals; handed again at each
	// one it was counted as several moves.
	ok := s != nil && s.running && s.cancel != nil && !s.handing
	if ok {
		s.handing = true
		s.cancel()
	}
	w.mu.Unlock()
	if ok {
		w.log.Info(why, "endpoint", id)
		w.m.SocketMoves.WithLabelValues("out").Inc()
	}
}

// orphanCandidates lists the active WebSocket inboxes of which this
// process runs no socket, on a shared database (on an exclusive one no
// other process can hold a socket).
func (w *Worker) orphanCandidates() []string {
	if w.o.ExclusiveDatabase {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for id, st := range w.inboxes {
		if st.ep.ReceiveMode != domain.ReceiveWebSocket || st.refused != nil {
			continue
		}
		if s := w.sockets[id]; s != nil && s.running {
			continue
		}
		out = append(out, id)
	}
	return out
}
