package inbound

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"time"

	"github.com/paperclipai/paperclipai/internal/agentmail"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/inbound/queue"
	"github.com/paperclipai/paperclipai/internal/store"
)

// Health messages of the live connection (docs/email-pipeline.md, "Live connection (WebSocket)").
const (
	healthSocketClosed   = "Live email connection closed; reconnecting and catching up."
	healthAdmitFailed    = "Email event could not be recorded; catch-up will retry."
	healthSocketRejected = "AgentMail refused the live email connection; reconnect the inbox with a valid key."
	healthConnected      = "Connected"
)

// socketState is this process's live connection of one inbox. At most one
// goroutine runs per inbox; running is cleared when it ends.
type socketState struct {
	lease       *store.Lease
	running     bool
	connected   bool
	cancel      context.CancelFunc
	reconnectAt time.Time
	backoff     time.Duration
	// config is the updated_at of the inbox row the last socket started
	// with. Only operator changes (setup, reconnect, pause, resume) touch
	// it, so a newer row means the socket must start again with the new
	// configuration and any reconnect backoff is void.
	config time.Time
	// catchupDue asks the next tick for a catch-up scan that starts after
	// the request (see requestCatchup); catchupRunning is set while that
	// scan runs.
	catchupDue     bool
	catchupRunning bool
	// elsewhereUntil is when the socket lease another process holds
	// lapses, as last seen; until then that process scans the inbox.
	elsewhereUntil time.Time
	// started is when this process took the socket lease: a moment after
	// the lease's row committed.
	started time.Time
	// handTo is the member that joined after this socket started and is
	// its preferred owner (ownership.go), set at the renewal that first
	// showed the member (handMarked counts renewals); "" when the socket
	// stays here.
	handTo     string
	handMarked int64
	// handing is set once handOver closed the socket, until it ends.
	handing bool
	// taking is set while maintainSocket tries the free lease: the try
	// holds a slot of the share cap (see reserveSocketSlotLocked).
	taking bool
}

// maintainSocket keeps exactly one live socket per inbox across replicas
// (docs/email-pipeline.md, "Live connection (WebSocket)"): when this process holds no socket for the inbox, it
// acquires the free socket lease and starts a connection (renewLoop renews
// all of this process's socket leases at once), and it returns when the
// socket next needs attention (zero: only a signal). A replica that finds
// the lease held does not poll it: renewLoop notices, in one statement for
// all inboxes, when a lease lapses.
func (w *Worker) maintainSocket(ctx context.Context, ep domain.EmailEndpoint, key string) time.Time {
	now := time.Now()
	w.mu.Lock()
	s := w.sockets[ep.ID]
	if s == nil {
		s = &socketState{}
		w.sockets[ep.ID] = s
	}
	if s.running {
		if !ep.UpdatedAt.Equal(s.config) {
			// The inbox was changed since this socket started (reconnected,
			// or paused and resumed): close it; the next tick starts one
			// with the new configuration.
			s.cancel()
		}
		// renewLoop renews its lease; nothing else to do.
		w.mu.Unlock()
		return time.Time{}
	}
	if ep.UpdatedAt.After(s.config) {
		// Forget any reconnect backoff: the credentials may have just been
		// replaced after the old ones were refused.
		s.reconnectAt, s.backoff = time.Time{}, 0
	}
	if now.Before(s.reconnectAt) {
		at := s.reconnectAt
		w.mu.Unlock()
		return at
	}
	if !w.mayTakeLocked(ep.ID) {
		// Another live replica is the inbox's preferred owner
		// (ownership.go): leave it that replica unless the lease stays
		// free (renewLoop wakes this one again while nobody takes it).
		w.mu.Unlock()
		return time.Time{}
	}
	if !w.reserveSocketSlotLocked(s) {
		// At its share (or already trying this lease): leave the inbox to
		// a replica under its own (renewLoop wakes this one again while
		// nobody takes it).
		w.mu.Unlock()
		return time.Time{}
	}
	w.mu.Unlock()
	if w.stopping.Load() {
		w.mu.Lock()
		s.taking = false
		w.mu.Unlock()
		return time.Time{}
	}
	l, until, err := w.st.TryLease(ctx, w.q, ep.CompanyID, ep.ID, store.LeaseKeySocket, w.o.Holder, w.t.SocketLeaseTTL)
	if l == nil {
		w.mu.Lock()
		s.taking = false
		w.mu.Unlock()
	}
	if err != nil {
		if ctx.Err() == nil {
			w.log.Warn("acquire socket lease", "endpoint", ep.ID, "err", err)
		}
		return now.Add(time.Second)
	}
	if l == nil {
		if !until.After(now) {
			return now.Add(time.Second)
		}
		// The holder renews it; renewLoop notices when it lapses, and a
		// graceful release by the holder is signalled (its payload names
		// the inbox) and wakes us at once.
		w.mu.Lock()
		s.elsewhereUntil = until
		w.mu.Unlock()
		return time.Time{}
	}
	sctx, cancel := context.WithCancel(w.ctx)
	w.mu.Lock()
	s.lease, s.running, s.connected, s.cancel, s.config, s.taking = l, true, false, cancel, ep.UpdatedAt, false
	// started is taken after the lease's commit (see closeSocketsLost).
	s.elsewhereUntil, s.started, s.handTo, s.handing = time.Time{}, time.Now(), "", false
	moved := w.takenOverLocked(ep.ID)
	w.mu.Unlock()
	if moved {
		w.m.SocketMoves.WithLabelValues("in").Inc()
	}
	w.wg.Add(1)
	go w.runSocket(sctx, ep, key, l)
	return time.Time{}
}

// reserveSocketSlotLocked marks s as taking its lease when this process is
// under its share cap, counting the sockets it runs and those whose lease
// it is trying now, and reports whether it did. The caller holds w.mu and,
// on true, clears the mark after the try, under the same lock hold that
// records a lease taken as running, so the slot is never uncounted.
//
// Why the tries count: a round visits up to eight inboxes at once, and
// after a replica dies the survivors are woken for all its inboxes in the
// same round. Counting only running sockets, every one of those visits
// saw the same count under the cap, so a survivor preferred for more of
// the dead replica's inboxes than its cap left took them all, went over
// its cap, and at its next renewal shed a socket it had held before the
// kill to the other survivor (the "handing a socket to a replica under
// its share" TestSocketsSpreadOverReplicas saw).
func (w *Worker) reserveSocketSlotLocked(s *socketState) bool {
	if s.taking {
		return false
	}
	if share := w.socketShareLocked(); share > 0 {
		used := 0
		for _, o := range w.sockets {
			if o.running || o.taking {
				used++
			}
		}
		if used >= share {
			return false
		}
	}
	s.taking = true
	return true
}

// socketHeldElsewhere reports whether another process holds the inbox's
// socket lease: as this process saw when it last tried the lease (until
// that lease would lapse), or as the last batch renewal listed.
func (w *Worker) socketHeldElsewhere(endpointID string, now time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.sockets[endpointID]
	if s != nil && s.running {
		return false
	}
	return s != nil && now.Before(s.elsewhereUntil) || w.elsewhere[endpointID] != ""
}

// socketConnectedLocked is SocketConnected with w.mu held.
func (w *Worker) socketConnectedLocked(endpointID string) bool {
	s := w.sockets[endpointID]
	return s != nil && s.running && s.connected
}

// runningSockets counts this process's running sockets.
func (w *Worker) runningSockets() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, s := range w.sockets {
		if s.running {
			n++
		}
	}
	return n
}

// closeSocketsLost closes every running socket whose lease token is not in
// renewed (the socket tokens a batch renewal that began at began renewed):
// another process may own the inbox now, and two sockets must never
// overlap. It returns the renewed tokens no running socket of this
// process had at this renewal and the one before.
//
// Why a socket started after began is kept: its lease row may have
// committed after the renewal statement took its snapshot, so the renewal
// could not see it, and the lease is fresh (a full TTL from its own
// commit); the next renewal judges it. Closed as lost, a socket a
// survivor had just taken over after a kill was taken again, a move too
// many.
func (w *Worker) closeSocketsLost(renewed map[string]bool, began time.Time) (stray []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	mine := map[string]bool{}
	for id, s := range w.sockets {
		if s.lease == nil {
			continue
		}
		if s.running {
			mine[s.lease.Token] = true
		}
		if s.running && !renewed[s.lease.Token] && s.cancel != nil && s.started.Before(began) {
			w.log.Warn("socket lease lost; closing the socket", "endpoint", id)
			s.cancel()
		}
	}
	// Why two renewals in a row: a socket lease just taken is not yet
	// recorded as running (maintainSocket records it right after the
	// claim), so a token counts as stray only when it was not ours at the
	// previous renewal either.
	next := map[string]bool{}
	for token := range renewed {
		if mine[token] {
			continue
		}
		if w.strayTokens[token] {
			stray = append(stray, token)
		} else {
			next[token] = true
		}
	}
	w.strayTokens = next
	return stray
}

// runSocket dials, subscribes, admits every frame and, when the stream
// ends, releases its own lease row and schedules the reconnect.
func (w *Worker) runSocket(ctx context.Context, ep domain.EmailEndpoint, key string, l *store.Lease) {
	defer w.wg.Done()
	stream, err := agentmail.Dial(ctx, w.o.WebSocketURL, key, []string{ep.Address},
		&agentmail.StreamOptions{SubscribeTimeout: w.t.SubscribeTimeout})
	if err == nil {
		w.socketSubscribed(ep, l)
		err = w.readSocket(ctx, ep, stream)
		stream.Close()
	}
	w.socketEnded(ep, l, err)
}

// socketSubscribed runs on the subscription acknowledgement: the backoff
// resets, and a catch-up is requested because AgentMail does not replay
// events missed while no socket was subscribed.
func (w *Worker) socketSubscribed(ep domain.EmailEndpoint, l *store.Lease) {
	w.mu.Lock()
	if s := w.sockets[ep.ID]; s != nil && s.lease == l {
		s.connected = true
		s.backoff = 0
	}
	w.mu.Unlock()
	w.log.Info("live connection subscribed", "endpoint", ep.ID)
	w.mu.Lock()
	if st := w.inboxes[ep.ID]; st != nil {
		// Unknown until the scan below writes it: another process may have
		// written a socket failure since this one last looked.
		st.health, st.healthAt = "", time.Now()
	}
	w.mu.Unlock()
	w.requestCatchup(ep.ID)
	w.wakeFor(ep.ID, wakeSocket)
}

// requestCatchup marks the inbox for a catch-up scan at the next tick.
//
// Why in memory and not by clearing last_sync_at: the mark must survive a
// scan that is already running. That scan may have listed the inbox before
// the mail the socket missed arrived, and when it finishes it records
// last_sync_at, which overwrote a cleared column and so lost the request
// until the periodic scan, a minute later. The mark is taken only when a
// scan starts (takeCatchupRequest), so a request made during a scan always
// leads to one more scan, whose listing starts after the request.
func (w *Worker) requestCatchup(endpointID string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if s := w.sockets[endpointID]; s != nil {
		s.catchupDue = true
	}
}

// takeCatchupRequest clears and returns the inbox's catch-up mark; when
// it returns true the caller runs the scan and then calls
// endCatchupRequest.
func (w *Worker) takeCatchupRequest(endpointID string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.sockets[endpointID]
	if s == nil || !s.catchupDue {
		return false
	}
	s.catchupDue, s.catchupRunning = false, true
	return true
}

// endCatchupRequest records the end of a requested scan; a scan that did
// not complete leaves the request standing.
func (w *Worker) endCatchupRequest(endpointID string, completed bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if s := w.sockets[endpointID]; s != nil {
		s.catchupRunning = false
		if !completed {
			s.catchupDue = true
		}
	}
}

// readSocket admits the stream's frames: it waits for one, then drains
// whatever else the stream has already received (up to maxAdmitBatch
// frames) into one transaction, so a burst of mail costs one commit
// instead of one per message while a lone frame is admitted at once.
//
// Why no reader goroutine of its own: the stream already reads ahead into
// its own buffer while a batch is admitted, and a replica holds thousands
// of idle sockets, each of which would park one more goroutine (and its
// stack) for nothing.
func (w *Worker) readSocket(ctx context.Context, ep domain.EmailEndpoint, stream *agentmail.Stream) error {
	for {
		f, err := stream.Next(ctx)
		if err != nil {
			return err
		}
		batch := [][]byte{f.Raw}
		for len(batch) < maxAdmitBatch {
			f, ok := stream.TryNext()
			if !ok {
				break
			}
			batch = append(batch, f.Raw)
		}
		var evs []agentmail.Event
		for _, r := range batch {
			ev, err := agentmail.NormalizeEvent(r)
			if err != nil || ev == nil {
				if err != nil {
					w.log.Warn("ignored an invalid WebSocket event", "endpoint", ep.ID)
				}
				continue
			}
			if !strings.EqualFold(ev.InboxID, ep.Address) {
				w.log.Warn("ignored a WebSocket event for another inbox", "endpoint", ep.ID)
				continue
			}
			evs = append(evs, *ev)
		}
		if len(evs) == 0 {
			continue
		}
		if _, err := w.AdmitEvents(ctx, ep, evs, queue.SourceWebSocket); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if errors.Is(err, queue.ErrInboxNotActive) {
				return err
			}
			// The events are lost to this socket, but a catch-up scan
			// will admit the messages: ask for one now (it is retried
			// until it completes; the healthy socket's periodic scan may
			// be minutes away), and say so on the inbox.
			w.log.Warn("admit WebSocket events", "endpoint", ep.ID, "err", err)
			w.requestCatchup(ep.ID)
			w.wakeFor(ep.ID, wakeSocket)
			w.setHealth(ctx, ep.ID, healthAdmitFailed, healthAdmitFailed)
		}
	}
}

// maxAdmitBatch bounds the frames admitted in one transaction.
const maxAdmitBatch = 64

// socketEnded releases only this socket's lease, records the error and
// schedules a reconnect with exponential backoff (2 s, 4 s, … 60 s; a
// refused credential waits the maximum instead of hammering the provider).
func (w *Worker) socketEnded(ep domain.EmailEndpoint, l *store.Lease, err error) {
	rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if rerr := l.Release(rctx); rerr != nil {
		w.log.Warn("release socket lease", "endpoint", ep.ID, "err", rerr)
	}
	stopping := w.stopping.Load()
	w.mu.Lock()
	s := w.sockets[ep.ID]
	if s != nil && s.lease == l {
		s.running, s.connected = false, false
		if s.backoff == 0 {
			s.backoff = w.t.ReconnectMin
		} else {
			s.backoff = min(w.t.ReconnectMax, s.backoff*2)
		}
		if agentmail.IsAuthFailure(err) {
			s.backoff = w.t.ReconnectMax
		}
		s.reconnectAt = time.Now().Add(s.backoff)
	}
	w.mu.Unlock()
	// Another replica may be waiting for this lease: tell it now (naming
	// the inbox) rather than letting it wait for the lease to expire.
	_ = w.q.tx(rctx, func(tx *sql.Tx) error { return queue.NotifySocketEndedTx(rctx, tx, w.db, ep.ID) })
	if stopping {
		return
	}
	msg := healthSocketClosed
	if agentmail.IsAuthFailure(err) {
		msg = healthSocketRejected
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		w.log.Info("live connection ended", "endpoint", ep.ID, "err", agentmail.Describe(err))
	}
	if !errors.Is(err, queue.ErrInboxNotActive) && !errors.Is(err, context.Canceled) {
		w.setHealth(rctx, ep.ID, msg, msg)
	}
	w.wakeFor(ep.ID, wakeSocket)
}

// SocketConnected reports whether this process holds a subscribed socket
// for the inbox.
func (w *Worker) SocketConnected(endpointID string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.sockets[endpointID]
	return s != nil && s.running && s.connected
}

// SocketCaughtUp reports whether this process holds a subscribed socket for
// the inbox and the catch-up scan its subscription asked for has completed:
// mail arriving from then on comes through the socket, not through that
// scan. Tests use it to know which transport will admit a message.
func (w *Worker) SocketCaughtUp(endpointID string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.sockets[endpointID]
	return s != nil && s.running && s.connected && !s.catchupDue && !s.catchupRunning
}

func (w *Worker) closeSocket(endpointID string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if s := w.sockets[endpointID]; s != nil && s.running && s.cancel != nil {
		s.cancel()
	}
}

func (w *Worker) closeSocketsExcept(keep map[string]bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for id, s := range w.sockets {
		if !keep[id] && s.running && s.cancel != nil {
			s.cancel()
		}
	}
}
