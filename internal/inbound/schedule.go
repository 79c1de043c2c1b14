package inbound

import (
	"context"
	"hash/fnv"
	"sync/atomic"
	"time"

	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/email"
	"github.com/paperclipai/paperclipai/internal/inbound/queue"
	"github.com/paperclipai/paperclipai/internal/inbound/receive"
	"github.com/paperclipai/paperclipai/internal/store"
)

// rescanInterval is the period of the safety rescan of every active inbox
// (two indexed statements), which finds what no signal announced: an
// inbox set up or changed on another replica whose notification was lost.
const rescanInterval = 60 * time.Second

// inboxState is this process's schedule of one active inbox: the cached
// active inbox check and the deadlines of its three kinds of work. Fields
// are guarded by Worker.mu.
type inboxState struct {
	ep domain.EmailEndpoint
	// credVersion and updatedAt are the credential version
	// (store.ActiveInbox) and row update time the cached check was made
	// for; checked says the check ran.
	credVersion string
	updatedAt   time.Time
	checked     bool
	key         string
	refused     error
	// deliveryAt is when the inbox's deliveries next need processing (zero:
	// none waits); socketAt when its socket next needs attention (zero:
	// only a signal); catchupAt when the periodic catch-up scan is due.
	deliveryAt time.Time
	socketAt   time.Time
	catchupAt  time.Time
	// health is the health message last read or written by this process,
	// so a healthy scan does not rewrite an unchanged "Connected".
	health string
	// healthAt is when this process last changed health itself, and
	// recordedAt when it last recorded a finished scan: a rescan read that
	// began before either may predate that write, so its health or sync
	// columns are not taken over the process's own (applyRead).
	healthAt   time.Time
	recordedAt time.Time
	// seen is the number of the last rescan read that listed the inbox.
	seen uint64
	// webhookAt is when a signed webhook delivery last verified here.
	webhookAt time.Time
	// finishing is set while a finished scan waits for its batched record
	// (flushCatchups), so the stale last_sync_at of a rescan is not taken
	// for a forced catch-up.
	finishing bool
}

// due reports the inbox's earliest deadline (zero: none).
func (st *inboxState) due() time.Time {
	return soonest(soonest(st.deliveryAt, st.socketAt), st.catchupAt)
}

// soonest returns the earlier of two deadlines, zero meaning none.
func soonest(a, b time.Time) time.Time {
	switch {
	case a.IsZero():
		return b
	case b.IsZero():
		return a
	case b.Before(a):
		return b
	}
	return a
}

// What a named wake asks a visit to look at.
const (
	wakeSocket     = 1 << iota // the socket (it ended, or may be orphaned)
	wakeDeliveries             // the deliveries (something was admitted)
)

// wakeFor asks the worker to visit one inbox now, for the given kinds of
// work, without looking at any other. It never blocks.
func (w *Worker) wakeFor(endpointID string, kinds int) {
	w.mu.Lock()
	w.named[endpointID] |= kinds
	w.mu.Unlock()
	w.wakeSig.Notify()
}

// loop is the single-flight scheduler: it sleeps until the earliest
// deadline of any inbox, a named wake (an admission, a socket that ended)
// or a finished rescan read (rescanLoop), and then visits only the inboxes
// that are due or named.
func (w *Worker) loop(ctx context.Context) {
	defer w.wg.Done()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	why := queue.StageRoundTimer
	for {
		if queue.Tracing() {
			queue.Trace(why, "")
		}
		next := w.round(ctx)
		if ctx.Err() != nil {
			return
		}
		resetTimer(timer, max(time.Until(next), 0))
		select {
		case <-ctx.Done():
			return
		case <-w.rescanned:
			why = queue.StageRoundRescan
		case <-w.wakeSig:
			why = queue.StageRoundSignal
		case <-timer.C:
			why = queue.StageRoundTimer
		}
	}
}

// resetTimer stops t, drains a fire it missed and sets it to d.
func resetTimer(t *time.Timer, d time.Duration) {
	if !t.Stop() {
		select {
		case <-t.C:
		default:
		}
	}
	t.Reset(d)
}

// rescanRead is one read of every active inbox and of the inboxes with
// waiting deliveries, handed from rescanLoop to the scheduling loop.
type rescanRead struct {
	started time.Time
	rows    []store.ActiveInbox
	waiting []string
}

// unknownWake is a named wake for an inbox this process did not know when
// the wake came (set up on another replica a moment ago).
type unknownWake struct {
	kinds int
	at    time.Time
}

// rescanLoop reads every active inbox at start, on a lifecycle signal
// (Notify), when a wake names an unknown inbox and every rescanInterval,
// and hands each read to the scheduling loop. Why a goroutine of its own:
// at 10,000 inboxes a read takes about 100 ms of database time plus the
// decoding, and a loop that read inline held every named wake (a busy
// inbox's new mail) behind it. The loop only applies a finished read
// (applyRead), between its visits, so the schedule still changes in one
// place; a read that began before a write of this process is reconciled
// there.
func (w *Worker) rescanLoop(ctx context.Context) {
	defer w.wg.Done()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.o.Work:
		case <-w.rescanSig:
		case <-timer.C:
		}
		read, err := w.readInboxes(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			w.log.Error("list active inboxes", "err", err)
			resetTimer(timer, time.Second)
			continue
		}
		w.mu.Lock()
		w.pendingRead = read
		w.mu.Unlock()
		w.rescanned.Notify()
		resetTimer(timer, rescanInterval)
	}
}

// readInboxes reads every active inbox with its credential version and
// the inboxes with waiting deliveries (two statements).
func (w *Worker) readInboxes(ctx context.Context) (*rescanRead, error) {
	read := &rescanRead{started: time.Now()}
	if h := rescanHold.Load(); h != nil {
		(*h)()
	}
	var err error
	if read.rows, err = w.st.ActiveInboxes(ctx, w.q, email.TargetEndpoint, email.PathAPIKey); err != nil {
		return nil, err
	}
	if read.waiting, err = w.st.EndpointsWithWaitingDeliveries(ctx, w.q); err != nil {
		return nil, err
	}
	return read, nil
}

// rescanHold, when set (tests only, export_test.go), runs at the start of
// every rescan read, so a test can hold a read open.
var rescanHold atomic.Pointer[func()]

// round runs one scheduling pass and returns when the next is due.
func (w *Worker) round(ctx context.Context) time.Time {
	now := time.Now()
	w.mu.Lock()
	read := w.pendingRead
	w.pendingRead = nil
	w.mu.Unlock()
	if read != nil {
		w.applyRead(read, now)
	}
	w.mu.Lock()
	named := w.named
	w.named = map[string]int{}
	var visit []*inboxState
	var kinds []int
	for id, k := range named {
		if w.inboxes[id] == nil {
			// Named by another replica before this one knew the inbox
			// (set up there a moment ago): the wake waits for a read that
			// began after it (applyRead).
			u := w.unknown[id]
			if u.at.IsZero() {
				u.at = now
			}
			u.kinds |= k
			w.unknown[id] = u
			w.rescanSig.Notify()
		}
	}
	for id, st := range w.inboxes {
		d := st.due()
		if named[id] != 0 || (!d.IsZero() && !d.After(now)) {
			visit = append(visit, st)
			kinds = append(kinds, named[id])
		}
	}
	w.mu.Unlock()
	receive.Bounded(8, len(visit), func(i int) { w.visit(ctx, visit[i], kinds[i]) })
	next := now.Add(rescanInterval)
	w.mu.Lock()
	for _, st := range w.inboxes {
		next = soonest(next, st.due())
	}
	w.mu.Unlock()
	return next
}

// applyRead takes a rescan read into the schedule: it forgets inboxes that
// stopped (closing their sockets), drops the cached check of every inbox
// whose version changed, marks what is due and turns the waiting wakes of
// inboxes it learned into named ones. It runs in the loop, never beside a
// visit. The read may have begun before a write this process made since
// (a health message, a finished scan's record): those columns then keep
// the process's own values, which are newer.
func (w *Worker) applyRead(read *rescanRead, now time.Time) {
	w.mu.Lock()
	w.reads++
	gen := w.reads
	for i := range read.rows {
		r := &read.rows[i]
		st := w.inboxes[r.ID]
		if st == nil {
			st = &inboxState{health: r.HealthMessage}
			w.inboxes[r.ID] = st
			// Activation (no scan yet): now; otherwise at the inbox's
			// slot after the last scan. A WebSocket inbox also scans once
			// its socket subscribes.
			st.catchupAt = now
			if r.LastSyncAt != nil {
				st.catchupAt = w.nextScan(r.ID, *r.LastSyncAt, w.t.CatchupInterval)
			}
		}
		st.seen = gen
		if r.CredentialVersion != st.credVersion || !r.UpdatedAt.Equal(st.updatedAt) {
			st.credVersion, st.updatedAt, st.checked = r.CredentialVersion, r.UpdatedAt, false
			st.socketAt = now
		}
		synced := read.started.After(st.recordedAt)
		if r.LastSyncAt == nil && !st.finishing && synced {
			// Resumed, or a catch-up was forced (store.ForceCatchup).
			st.catchupAt = now
		}
		checkpoint, lastSync := st.ep.SyncCheckpoint, st.ep.LastSyncAt
		st.ep = r.EmailEndpoint
		if !synced {
			st.ep.SyncCheckpoint, st.ep.LastSyncAt = checkpoint, lastSync
		}
		if read.started.After(st.healthAt) {
			st.health = r.HealthMessage
		}
		if r.ReceiveMode != domain.ReceiveWebSocket {
			st.socketAt = time.Time{}
		}
	}
	for _, id := range read.waiting {
		if st := w.inboxes[id]; st != nil {
			st.deliveryAt = now
		}
	}
	for id, st := range w.inboxes {
		if st.seen != gen {
			delete(w.inboxes, id)
		}
	}
	for id, u := range w.unknown {
		if w.inboxes[id] != nil {
			w.named[id] |= u.kinds
			delete(w.unknown, id)
		} else if read.started.After(u.at) {
			// Not active when a later read began: nothing to receive.
			delete(w.unknown, id)
		}
	}
	for id, s := range w.sockets {
		st := w.inboxes[id]
		if (st == nil || st.ep.ReceiveMode != domain.ReceiveWebSocket) && s.running && s.cancel != nil {
			s.cancel()
		}
	}
	w.mu.Unlock()
}

// check returns the inbox's runtime key from the cached active inbox
// check, running the check when the inbox's version changed since. A
// refusal is cached until the version changes; a failure to check (a
// database error) is not.
func (w *Worker) check(ctx context.Context, st *inboxState) (domain.EmailEndpoint, string, error) {
	w.mu.Lock()
	ep, checked, key, refused := st.ep, st.checked, st.key, st.refused
	w.mu.Unlock()
	if checked {
		return ep, key, refused
	}
	key, err := w.o.Email.CheckActive(ctx, w.q, ep)
	if err != nil && !domain.IsRefusal(err) {
		return ep, "", err
	}
	w.mu.Lock()
	st.checked, st.key, st.refused = true, key, err
	w.mu.Unlock()
	return ep, key, err
}

// visit does the due work of one inbox: socket upkeep, one batch of
// deliveries, the catch-up scan, plus whatever a named wake asked for.
func (w *Worker) visit(ctx context.Context, st *inboxState, named int) {
	now := time.Now()
	ep, key, err := w.check(ctx, st)
	if err != nil {
		if domain.IsRefusal(err) {
			// Not active, credential gone or access revoked: stop
			// receiving; deliveries wait until the inbox's version changes
			// (the email service signals the worker then).
			w.closeSocket(ep.ID)
			w.mu.Lock()
			st.deliveryAt, st.socketAt, st.catchupAt = time.Time{}, time.Time{}, time.Time{}
			w.mu.Unlock()
			return
		}
		w.mu.Lock()
		st.socketAt = now.Add(time.Second)
		w.mu.Unlock()
		return
	}
	w.mu.Lock()
	socketDue := ep.ReceiveMode == domain.ReceiveWebSocket && (named&wakeSocket != 0 || (!st.socketAt.IsZero() && !st.socketAt.After(now)))
	deliveriesDue := named&wakeDeliveries != 0 || (!st.deliveryAt.IsZero() && !st.deliveryAt.After(now))
	w.mu.Unlock()
	if socketDue {
		at := w.maintainSocket(ctx, ep, key)
		w.mu.Lock()
		st.socketAt = at
		w.mu.Unlock()
	}
	if deliveriesDue {
		at := w.recv.Batch(ctx, ep, key)
		// Batch answers an hour ahead when nothing waits.
		if at.Sub(time.Now()) > 50*time.Minute {
			at = time.Time{}
		}
		w.mu.Lock()
		st.deliveryAt = at
		w.mu.Unlock()
	}
	w.maybeCatchup(ctx, st, ep, key, now)
}

// maybeCatchup runs the inbox's catch-up scan when one was requested (a
// socket subscribed) or its periodic slot came, and schedules the next:
// every CatchupHealthyInterval while the transport is healthy (this
// process's socket is subscribed, or a signed webhook verified within that
// interval), otherwise every CatchupInterval. A WebSocket inbox whose
// socket another replica holds is scanned by that replica.
func (w *Worker) maybeCatchup(ctx context.Context, st *inboxState, ep domain.EmailEndpoint, key string, now time.Time) {
	requested := w.takeCatchupRequest(ep.ID)
	w.mu.Lock()
	due := !st.catchupAt.IsZero() && !st.catchupAt.After(now)
	w.mu.Unlock()
	if !requested && !due {
		return
	}
	if !requested && ep.ReceiveMode == domain.ReceiveWebSocket && w.socketHeldElsewhere(ep.ID, now) {
		w.mu.Lock()
		st.catchupAt = w.nextScan(ep.ID, now, w.t.CatchupInterval)
		w.mu.Unlock()
		return
	}
	completed, busy := w.catchup(ctx, st, ep, key)
	if requested {
		// Another replica's scan (which may predate the request) holds the
		// lease, or the scan failed: the request stands and is retried
		// shortly rather than at the next periodic scan.
		w.endCatchupRequest(ep.ID, completed)
	}
	end := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	interval := w.t.CatchupInterval
	if ep.ReceiveMode == domain.ReceiveWebSocket && w.socketConnectedLocked(ep.ID) ||
		ep.ReceiveMode == domain.ReceiveWebhook && !st.webhookAt.IsZero() && end.Sub(st.webhookAt) < w.t.CatchupHealthyInterval {
		interval = w.t.CatchupHealthyInterval
	}
	st.catchupAt = w.nextScan(ep.ID, end, interval)
	if !completed && (requested || !busy) {
		// A failed scan (or a requested one another replica's scan may
		// have predated) is retried shortly; a periodic scan another
		// replica is running now counts as done.
		st.catchupAt = end.Add(w.t.ReconnectMin)
	}
}

// nextScan returns the inbox's next periodic scan slot at least half an
// interval after last. Each inbox has a fixed phase in the interval (a
// hash of its id), so a thousand inboxes connected at the same moment
// scan evenly spread over the interval instead of in a burst every
// interval. Phases fall on a grid of scanSlot: why, with 10,000 inboxes
// every replica has a slot of some inbox (most of them held by another
// replica, whose visit only checks that) every few milliseconds, and
// each slot of its own woke the scheduling loop for a round over every
// inbox, a hundred rounds a second per replica, idle. On the grid the
// slots of one second share one round. offset shifts this process's grid
// (see Worker.scanOffset), so the replicas' slot rounds do not all fall
// on the same instant.
func nextScan(endpointID string, last time.Time, interval, offset time.Duration) time.Time {
	h := fnv.New64a()
	_, _ = h.Write([]byte(endpointID))
	slot := scanSlot(interval)
	phase := (time.Duration(h.Sum64()%uint64(interval)).Truncate(slot) + offset%slot) % interval
	after := last.Add(interval / 2)
	t := after.Truncate(interval).Add(phase)
	for !t.After(after) {
		t = t.Add(interval)
	}
	return t
}

// nextScan is this process's slot for the inbox: nextScan on the grid
// shifted by its scanOffset.
func (w *Worker) nextScan(endpointID string, last time.Time, interval time.Duration) time.Time {
	return nextScan(endpointID, last, interval, w.scanOffset)
}

// scanSlot is the grid of scan phases: one second, or a tenth of a
// shorter interval (tests).
func scanSlot(interval time.Duration) time.Duration {
	return min(time.Second, max(interval/10, time.Millisecond))
}

// webhookVerified records that a signed webhook delivery of the inbox
// verified (its transport is healthy).
func (w *Worker) webhookVerified(endpointID string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if st := w.inboxes[endpointID]; st != nil {
		st.webhookAt = time.Now()
	}
}

// setHealth writes the inbox's health message and remembers it.
func (w *Worker) setHealth(ctx context.Context, endpointID, health, lastError string) {
	if err := w.st.SetEndpointHealth(ctx, w.q, endpointID, health, lastError); err != nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if st := w.inboxes[endpointID]; st != nil {
		st.health, st.healthAt = health, time.Now()
	}
}

// finishCatchup records a completed scan, group-commit style: when no
// record is being written it writes this one at once (so a lone scan's
// record is visible when the scan ends); scans that end while a write is
// in flight queue their records, and the writer then writes all of them in
// one more statement. Idle inboxes scan spread over time, so each
// record is one statement; a burst (a thousand sockets subscribing at
// once) costs a few.
func (w *Worker) finishCatchup(ctx context.Context, st *inboxState, endpointID string, started time.Time) {
	w.mu.Lock()
	c := st.ep.SyncCheckpoint
	if c == nil || started.After(*c) {
		st.ep.SyncCheckpoint = &started
	}
	st.finishing = true
	if old, ok := w.finished[endpointID]; !ok || started.Before(old) {
		w.finished[endpointID] = started
	}
	if w.flushing {
		w.mu.Unlock()
		return
	}
	w.flushing = true
	w.mu.Unlock()
	for w.flushCatchups(ctx) {
	}
	w.mu.Lock()
	w.flushing = false
	w.mu.Unlock()
}

// flushCatchups writes the queued scan records in one statement, with the
// earliest scan start as their checkpoint, and reports whether it wrote
// any. After a failure they stay queued for the next scan's write (or the
// one at shutdown).
func (w *Worker) flushCatchups(ctx context.Context) bool {
	w.mu.Lock()
	if len(w.finished) == 0 {
		w.mu.Unlock()
		return false
	}
	batch := w.finished
	w.finished = map[string]time.Time{}
	w.mu.Unlock()
	ids := make([]string, 0, len(batch))
	var first time.Time
	for id, t := range batch {
		ids = append(ids, id)
		if first.IsZero() || t.Before(first) {
			first = t
		}
	}
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	err := w.st.FinishCatchups(fctx, w.q, ids, first)
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		w.log.Warn("record catch-ups", "err", err)
		for id, t := range batch {
			if old, ok := w.finished[id]; !ok || t.Before(old) {
				w.finished[id] = t
			}
		}
		return false
	}
	for _, id := range ids {
		if st := w.inboxes[id]; st != nil {
			st.recordedAt = time.Now()
			if _, again := w.finished[id]; !again {
				st.finishing = false
			}
		}
	}
	return true
}
