package receive

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/paperclipai/paperclipai/internal/agentmail"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/inbound/queue"
	"github.com/paperclipai/paperclipai/internal/store"
)

// maxTxDeliveries bounds the deliveries received in one transaction. Each
// delivery alone costs a BEGIN, a COMMIT, the fence and the inbox row; on
// SQLite a commit also writes every page it dirtied to the WAL, and on
// PostgreSQL every transaction takes its own key-share locks on the rows
// all its inserts reference (company, inbox, agent), which concurrent
// transactions turn into multixacts. Sharing a transaction amortizes
// both (measured: about 30 % more emails/s on SQLite; on PostgreSQL
// 5–10 % more and about 8 % less CPU per email). On PostgreSQL this needs the
// lease renewal to skip thread leases that a fence holds locked
// (Store.RenewHolderLeases): waiting for them, it deadlocked with a
// transaction fencing two threads and made shared transactions about a
// third slower than one per delivery.
const maxTxDeliveries = 16

// receiveFault, when set (tests only, SetReceiveFault), runs at the
// start of every receiveBody and fails it with its error, inside the
// transaction.
var receiveFault atomic.Pointer[func(tx *sql.Tx, deliveryID string) error]

// SetReceiveFault makes every receiving transaction of the process call f
// first with the delivery's id, failing the transaction when f returns an
// error; nil removes it. Tests only: it lets a test fail one delivery's
// transaction and watch the failure stay with that delivery.
func SetReceiveFault(f func(tx *sql.Tx, deliveryID string) error) {
	if f == nil {
		receiveFault.Store(nil)
		return
	}
	receiveFault.Store(&f)
}

// threadRun is one provider thread's part of a batch: its lease, its due
// items in admission order, and what the batch does with them.
type threadRun struct {
	l     *store.Lease
	items []*item
	// ins are the prepared inputs of the items received in the batch
	// transaction: a prefix of items, less those finished while preparing
	// (filtered).
	ins []receiveInput
	// rest is the index in items of the first item left out of the batch
	// transaction; failErr, when set, is that item's failure while
	// preparing (the thread stops there).
	rest    int
	failErr error
	// results are the batch transaction's outcomes of ins, in order; a
	// thread's results stop early at an outcome that needs more work
	// (a failed wake, a retained delivery with its wake pending).
	results []receiveResult
	// txErr is the failure of a shared transaction that held this
	// thread's one delivery alone: that delivery's own failure, not
	// received again at once.
	txErr error
}

// committer decides how the prepared deliveries of a batch's threads
// commit (River's completer): oneByOne is the specification, each delivery
// in its own transaction; grouped is the optimisation, several threads'
// deliveries in a shared transaction. Both receive each thread in admission
// order under its lease and stop a thread at its first failure, recorded
// against that delivery alone; commit_test.go runs the same cases against
// both. commit reports progress (a delivery changed state).
type committer interface {
	commit(ctx context.Context, ep domain.EmailEndpoint, client *agentmail.Client, runs []*threadRun) (progress bool)
}

// oneByOneOnly makes every Receiver of the process commit one by one
// (tests only: the committer contract test runs its cases against both).
var oneByOneOnly atomic.Bool

// nextCommitter returns the committer of the next batch.
func (rv *Receiver) nextCommitter() committer {
	if oneByOneOnly.Load() {
		return oneByOne{rv}
	}
	return rv.commit
}

// oneByOne receives each thread's deliveries in order, one transaction
// each (processGroup), a few threads at a time.
type oneByOne struct{ rv *Receiver }

func (c oneByOne) commit(ctx context.Context, ep domain.EmailEndpoint, client *agentmail.Client, runs []*threadRun) bool {
	var progress atomic.Bool
	Bounded(c.rv.t.Concurrency, len(runs), func(i int) {
		if c.rv.processGroup(ctx, ep, client, runs[i].l, runs[i].items) {
			progress.Store(true)
		}
	})
	return progress.Load()
}

// grouped receives a batch's threads: each thread's provider I/O in
// order (a few threads at a time), and, as threads become ready, their
// prepared deliveries in shared transactions (group commit: a committer
// takes every thread ready when it is free, up to maxTxDeliveries, a
// thread never split over two transactions, so its deliveries commit in
// order), then whatever each thread has left, one delivery at a time as
// before. If a shared transaction fails, its deliveries are received again
// one by one, so a failure is recorded against its own delivery only.
type grouped struct{ rv *Receiver }

func (g grouped) commit(ctx context.Context, ep domain.EmailEndpoint, client *agentmail.Client, runs []*threadRun) bool {
	rv := g.rv
	var progress atomic.Bool
	ready := make(chan *threadRun, len(runs))
	var committers sync.WaitGroup
	for range rv.t.TxConcurrency {
		committers.Add(1)
		go func() {
			defer committers.Done()
			for r := range ready {
				chunk, n := []*threadRun{r}, len(r.ins)
			more:
				for n < maxTxDeliveries {
					select {
					case r, ok := <-ready:
						if !ok {
							break more
						}
						chunk, n = append(chunk, r), n+len(r.ins)
					default:
						break more
					}
				}
				rv.receiveChunk(ctx, ep, chunk)
				for _, r := range chunk {
					if rv.finishRun(ctx, ep, client, r) {
						progress.Store(true)
					}
				}
			}
		}()
	}
	Bounded(rv.t.Concurrency, len(runs), func(i int) {
		r := runs[i]
		if rv.prepareRun(ctx, ep, client, r) {
			progress.Store(true)
		}
		if len(r.ins) > 0 {
			if queue.Tracing() {
				for _, in := range r.ins {
					queue.Trace(queue.StagePrepared, in.it.d.ID)
				}
			}
			ready <- r
		} else if rv.finishRun(ctx, ep, client, r) {
			progress.Store(true)
		}
	})
	close(ready)
	committers.Wait()
	return progress.Load()
}

// prepareRun does the provider I/O of a thread's items in order until one
// cannot be received in a shared transaction (its fetch failed, it is
// already retained, or preparing it failed). It reports progress: a
// delivery finished as filtered.
func (rv *Receiver) prepareRun(ctx context.Context, ep domain.EmailEndpoint, client *agentmail.Client, r *threadRun) (progress bool) {
	for i, it := range r.items {
		r.rest = i
		if rv.stopping() || ctx.Err() != nil || it.fetchErr != nil || it.ev.TaskRecorded() ||
			!strings.EqualFold(it.ev.InboxID, ep.Address) {
			return progress
		}
		in, done, err := rv.prepareReceive(ctx, ep, client, r.l, it)
		if err != nil {
			r.failErr = err
			return progress
		}
		if done {
			progress = true
			continue
		}
		r.ins = append(r.ins, in)
	}
	r.rest = len(r.items)
	return progress
}

// receiveChunk receives the prepared deliveries of several threads in one
// transaction: each thread's fence once (with the inbox row and the
// thread's delivery rows, fenceDeliveries), then receiveBody for every
// delivery (each wake under its own savepoint, as
// alone). On failure the results are dropped and finishRun receives the
// deliveries one by one.
func (rv *Receiver) receiveChunk(ctx context.Context, ep domain.EmailEndpoint, chunk []*threadRun) {
	gate := chunk[0].ins[0].it.gate
	err := gate.tx(ctx, rv, func(tx *sql.Tx) error {
		if queue.Tracing() {
			for _, r := range chunk {
				for _, in := range r.ins {
					queue.Trace(queue.StageTxBegin, in.it.d.ID)
				}
			}
		}
		var cur *txInbox
		for _, r := range chunk {
			r.results = nil
			fenced := ""
			var locked map[string]store.EmailDelivery
			for i, in := range r.ins {
				// Why fence per thread and not per delivery: the fence
				// proves the lease for the whole transaction, and the
				// thread's advisory lock is held until commit. The fence
				// also locks the inbox row (shared) and the rows of the
				// thread's deliveries under the same lock key, one round
				// trip on PostgreSQL.
				if key := threadLockKey(ep.ID, in.msg.ThreadID); key != fenced {
					var err error
					if locked, err = rv.fenceDeliveries(ctx, tx, r.l, key, ep.ID, r.ins[i:], &cur); err != nil {
						return err
					}
					if queue.Tracing() {
						for id := range locked {
							queue.Trace(queue.StageFenced, id)
						}
					}
					fenced = key
				}
				d, ok := locked[in.it.d.ID]
				if !ok {
					return fmt.Errorf("delivery %s not locked by its thread's fence", in.it.d.ID)
				}
				res, err := rv.receiveBody(ctx, tx, cur, d, in)
				if err != nil {
					return err
				}
				r.results = append(r.results, res)
				if res.wakeErr != nil || (res.handled && res.ev.IsWakePending()) {
					// The thread's later deliveries wait for this one's
					// wake, as they would alone (processGroup).
					break
				}
			}
		}
		if cur == nil {
			return nil
		}
		return cur.numberTasks(ctx, rv, tx)
	})
	if err == nil && queue.Tracing() {
		for _, r := range chunk {
			for i := range r.results {
				queue.Trace(queue.StageCommitted, r.ins[i].it.d.ID)
			}
		}
	}
	if err != nil {
		for _, r := range chunk {
			r.results = nil
		}
		if len(chunk) == 1 && len(chunk[0].ins) == 1 {
			chunk[0].txErr = err
			return
		}
		if ctx.Err() == nil && !errors.Is(err, queue.ErrLeaseLost) && !errors.Is(err, queue.ErrInboxStopped) {
			rv.log.Info("shared receiving transaction failed; receiving its deliveries one by one", "endpoint", ep.ID,
				"deliveries", len(chunk), "err", queue.Redact(err))
		}
	}
}

// fenceDeliveries is fenceEndpointDeliveries of the deliveries in ins
// whose thread has lock key key, for receiveChunk, returned by id. The
// first call of a transaction sets cur, the inbox as the transaction read
// it.
func (rv *Receiver) fenceDeliveries(ctx context.Context, tx *sql.Tx, l *store.Lease, key, endpointID string, ins []receiveInput, cur **txInbox) (map[string]store.EmailDelivery, error) {
	var ids []string
	for _, in := range ins {
		if threadLockKey(endpointID, in.msg.ThreadID) == key {
			ids = append(ids, in.it.d.ID)
		}
	}
	ep, ds, err := rv.fenceEndpointDeliveries(ctx, tx, l, key, ids)
	if err != nil {
		return nil, err
	}
	if *cur == nil {
		*cur = &txInbox{EmailEndpoint: ep}
	}
	locked := make(map[string]store.EmailDelivery, len(ds))
	for _, d := range ds {
		locked[d.ID] = d
	}
	return locked, nil
}

// finishRun applies the shared transaction's committed outcomes of a
// thread and then receives what the thread has left in order, one
// delivery per transaction, stopping at the first failure (recorded as a
// retry of that delivery). It reports progress.
func (rv *Receiver) finishRun(ctx context.Context, ep domain.EmailEndpoint, client *agentmail.Client, r *threadRun) (progress bool) {
	if r.txErr != nil {
		return rv.failed(ctx, ep, r.ins[0].it, r.txErr)
	}
	for i, in := range r.ins {
		var err error
		if i < len(r.results) {
			progress = true
			err = rv.afterReceive(ctx, r.l, in.it, r.results[i])
		} else {
			if rv.stopping() || ctx.Err() != nil {
				return progress
			}
			err = rv.receivePrepared(ctx, r.l, in)
			if err == nil {
				progress = true
			}
		}
		if err != nil {
			return rv.failed(ctx, ep, in.it, err) || progress
		}
	}
	if r.failErr != nil {
		return rv.failed(ctx, ep, r.items[r.rest], r.failErr) || progress
	}
	if r.rest < len(r.items) && rv.processGroup(ctx, ep, client, r.l, r.items[r.rest:]) {
		progress = true
	}
	return progress
}

// receivePrepared receives one prepared delivery in its own transaction.
func (rv *Receiver) receivePrepared(ctx context.Context, l *store.Lease, in receiveInput) error {
	res, err := rv.receiveTx(ctx, in)
	if err != nil {
		return err
	}
	return rv.afterReceive(ctx, l, in.it, res)
}

// afterReceive finishes a committed receive as processOne does: the
// outcome (received), then a retry of the wake alone when it is pending.
func (rv *Receiver) afterReceive(ctx context.Context, l *store.Lease, it *item, res receiveResult) error {
	done, err := rv.received(it, res)
	if err != nil || done {
		return err
	}
	if it.ev.IsWakePending() {
		return rv.retryWake(ctx, l, it)
	}
	return nil
}

// failed handles a delivery's failure: nothing when the lease is lost or
// the worker stops (the delivery is the next holder's, or the next
// tick's), else a logged retry. It reports whether a retry was recorded.
func (rv *Receiver) failed(ctx context.Context, ep domain.EmailEndpoint, it *item, err error) bool {
	if errors.Is(err, queue.ErrLeaseLost) || ctx.Err() != nil {
		return false
	}
	if !errors.Is(err, queue.ErrInboxStopped) {
		rv.log.Warn("process delivery", "endpoint", ep.ID, "delivery", it.d.ID, "err", queue.Redact(err))
	}
	rv.retryDelivery(ctx, it.d.ID, err)
	return true
}
