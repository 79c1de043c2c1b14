package receive

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/paperclipai/paperclipai/internal/agentmail"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/inbound/queue"
	"github.com/paperclipai/paperclipai/internal/store"
)

// item is one due delivery with its prefetched provider message.
type item struct {
	d        store.EmailDelivery
	ev       queue.Event
	msg      *agentmail.Message
	fetchErr error
	// gate bounds the inbox's concurrent processing transactions (see
	// Timing.TxConcurrency); shared by every item of a batch.
	gate txGate
	// listing is the thread listing shared by the items of one provider
	// thread in a batch (see fetchThread); nil keeps none.
	listing *threadListing
}

// txGate bounds how many processing transactions of one inbox run at once.
type txGate chan struct{}

// tx runs fn in a transaction once the gate admits it (a nil gate admits
// at once).
func (g txGate) tx(ctx context.Context, rv *Receiver, fn func(tx *sql.Tx) error) error {
	if g != nil {
		select {
		case g <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
		defer func() { <-g }()
	}
	return rv.tx(ctx, fn)
}

// Batch takes one batch of the inbox's due deliveries, fetches their
// messages, and processes independent provider threads concurrently, each
// thread serially in admission order under its lease, with the inbox's
// runtime key. It returns when the inbox next has due work (an hour ahead
// when nothing waits).
func (rv *Receiver) Batch(ctx context.Context, ep domain.EmailEndpoint, key string) time.Time {
	now := time.Now()
	batch, err := rv.st.DueDeliveries(ctx, rv.q, ep.ID, rv.st.Now(), rv.t.BatchSize)
	if err != nil {
		if ctx.Err() == nil {
			rv.log.Error("list due deliveries", "endpoint", ep.ID, "err", err)
		}
		return now.Add(time.Second)
	}
	if len(batch) == 0 {
		return rv.nextAttempt(ctx, ep, now)
	}
	if queue.Tracing() {
		for _, d := range batch {
			queue.Trace(queue.StagePicked, d.ID)
		}
	}
	client := rv.o.Client.WithAPIKey(key)
	items := make([]*item, len(batch))
	gate := make(txGate, rv.t.TxConcurrency)
	// The items of a named provider thread share one listing from the
	// start: prefetch reads it for the first of them (see prefetch).
	listings := map[string]*threadListing{}
	for i, d := range batch {
		it := &item{d: d, gate: gate}
		it.ev, it.fetchErr = queue.Decode(d)
		if th := d.ProviderThreadID; th != "" {
			if listings[th] == nil {
				listings[th] = &threadListing{}
			}
			it.listing = listings[th]
		}
		items[i] = it
	}
	rv.prefetch(ctx, ep, client, items)

	// Group by provider thread, keeping admission order inside each group.
	var order []string
	groups := map[string][]*item{}
	for _, it := range items {
		thread := it.d.ProviderThreadID
		if thread == "" && it.msg != nil {
			thread = it.msg.ThreadID
			if err := rv.st.SetDeliveryThread(ctx, rv.q, it.d.ID, thread); err != nil && ctx.Err() == nil {
				rv.log.Warn("record delivery thread", "delivery", it.d.ID, "err", err)
			}
		}
		if thread == "" {
			thread = it.ev.ThreadID
		}
		gk := thread
		if gk == "" {
			// Unknown thread (the fetch failed): the delivery goes alone and
			// will be retried; it cannot be ordered against anything yet.
			gk = "delivery:" + it.d.ID
		}
		if g, ok := groups[gk]; ok {
			it.listing = g[0].listing
		} else {
			order = append(order, gk)
			if it.listing == nil {
				it.listing = &threadListing{}
			}
		}
		groups[gk] = append(groups[gk], it)
	}

	// The batch's thread leases are taken in one statement and released in
	// one, under one token (docs/benchmarks.md says why). A thread's lease
	// is thus held until the batch ends rather than until its own group
	// ends; every side effect is still fenced.
	keys := make([]string, len(order))
	for i, gk := range order {
		keys[i] = store.ThreadLeaseKey(gk)
	}
	leases, err := rv.st.TryLeases(ctx, rv.q, ep.CompanyID, ep.ID, keys, rv.o.Holder, rv.t.ThreadLeaseTTL)
	if err != nil {
		if ctx.Err() == nil {
			rv.log.Warn("acquire thread leases", "endpoint", ep.ID, "err", err)
		}
		return now.Add(time.Second)
	}
	rv.hold(1) // renewLoop keeps them while the batch runs
	defer rv.hold(-1)
	defer func() {
		if err := leases.Release(ctx); err != nil {
			rv.log.Warn("release thread leases", "endpoint", ep.ID, "err", err)
		}
	}()

	var runs []*threadRun
	skipped := false
	for i, gk := range order {
		l := leases.Get(keys[i])
		if l == nil {
			// Another replica holds the thread: skip it this tick.
			skipped = true
			continue
		}
		runs = append(runs, &threadRun{l: l, items: groups[gk]})
	}
	progress := rv.nextCommitter().commit(ctx, ep, client, runs)
	now = time.Now()
	if progress && len(batch) == rv.t.BatchSize {
		return now
	}
	next := rv.nextAttempt(ctx, ep, now)
	if !progress || skipped {
		// Nothing moved (another replica holds the threads, or every
		// attempt failed before changing state): look again in a second
		// rather than spinning; the holder's commits signal us sooner.
		next = later(next, now.Add(time.Second))
	}
	return next
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func (rv *Receiver) nextAttempt(ctx context.Context, ep domain.EmailEndpoint, now time.Time) time.Time {
	t, err := rv.st.NextDeliveryAttempt(ctx, rv.q, ep.ID, rv.st.Now())
	if err != nil {
		if ctx.Err() == nil {
			rv.log.Error("next delivery attempt", "endpoint", ep.ID, "err", err)
		}
		return now.Add(time.Second)
	}
	if t == nil {
		return now.Add(time.Hour)
	}
	return *t
}

// prefetch fetches, a few at a time, the authoritative message of every
// delivery not received yet: webhook and WebSocket payloads may lack the
// body, and work never starts from the event (docs/email-pipeline.md,
// "Processing a thread"). Only the first such delivery of each known
// provider thread is fetched here, and by reading its thread's listing,
// not the message: the listing holds the provider's full messages, this
// one's and (they were admitted before it ran) the later ones', and the
// receiving of each needs the listing anyway as its context (fetchThread
// uses it again when it holds the message). So a thread costs one provider
// read per batch, not a message read and then a thread read (a new thread,
// or a reply alone in its batch, was two sequential reads before its
// transaction could start). The message itself is read only when the
// listing lacks it (the listing lags) or the delivery names no thread
// (toPrefetch).
func (rv *Receiver) prefetch(ctx context.Context, ep domain.EmailEndpoint, client *agentmail.Client, items []*item) {
	todo := toPrefetch(items)
	Bounded(rv.t.Concurrency, len(todo), func(i int) {
		it := todo[i]
		if th := it.d.ProviderThreadID; th != "" && it.listing != nil {
			msgs, err := rv.listThread(ctx, client, ep.Address, th)
			if err != nil {
				it.fetchErr = err
				return
			}
			it.listing.threadID, it.listing.msgs = th, msgs
			if it.msg = it.listing.message(th, it.ev.MessageID); it.msg != nil {
				return
			}
		}
		it.msg, it.fetchErr = client.GetMessage(ctx, ep.Address, it.ev.MessageID)
		it.msg = queue.CleanMessage(it.msg)
	})
}

// toPrefetch are the items whose message prefetch reads: every one not
// received yet whose delivery names no provider thread (grouping needs
// the message's), and the first of each named thread.
func toPrefetch(items []*item) []*item {
	var todo []*item
	threads := map[string]bool{}
	for _, it := range items {
		if it.fetchErr != nil || it.ev.TaskRecorded() {
			continue
		}
		if th := it.d.ProviderThreadID; th != "" {
			if threads[th] {
				continue
			}
			threads[th] = true
		}
		todo = append(todo, it)
	}
	return todo
}

// processGroup runs one provider thread's deliveries in order under the
// thread lease l, which the caller holds, one transaction each. It stops
// at the first failure (recording a retry) so no later message of the
// thread overtakes it.
func (rv *Receiver) processGroup(ctx context.Context, ep domain.EmailEndpoint, client *agentmail.Client, l *store.Lease, items []*item) (progress bool) {
	for _, it := range items {
		if rv.stopping() || ctx.Err() != nil {
			return progress
		}
		err := rv.processOne(ctx, ep, client, l, it)
		if err == nil {
			progress = true
			continue
		}
		return rv.failed(ctx, ep, it, err) || progress
	}
	return progress
}

// fence proves, inside tx, that the thread lease is still ours (and
// extends it; see store.Lease.Fence), and that the worker is not stopping.
// With a lockKey it first takes that advisory lock (store.Lease.FenceLocked).
func (rv *Receiver) fence(ctx context.Context, tx *sql.Tx, l *store.Lease, lockKey string) error {
	if rv.stopping() {
		return queue.ErrLeaseLost
	}
	var err error
	if lockKey != "" {
		err = l.FenceLocked(ctx, tx, lockKey)
	} else {
		err = l.Fence(ctx, tx)
	}
	if errors.Is(err, store.ErrLeaseLost) {
		return queue.ErrLeaseLost
	}
	return err
}

// retryDelivery schedules a failed delivery again after
// min(300 s, 2^attempts s) (at least the provider's Retry-After), with a
// redacted error. Inbound retries never give up (docs/email-pipeline.md, "Deliveries: states and retries").
func (rv *Receiver) retryDelivery(ctx context.Context, id string, cause error) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	err := rv.tx(rctx, func(tx *sql.Tx) error {
		d, err := rv.st.GetDelivery(rctx, tx, id, true)
		if err != nil {
			return err
		}
		if d.State == domain.DeliveryProcessed || d.State == domain.DeliveryFiltered {
			return nil
		}
		delay := time.Second << min(d.Attempts, 8)
		delay = min(delay, 300*time.Second)
		if ra, ok := agentmail.RetryAfter(cause); ok && agentmail.IsTransient(cause) && ra > delay {
			delay = ra
		}
		next := rv.st.Now().Add(delay)
		d.Attempts++
		d.State, d.NextAttemptAt, d.RedactedError = domain.DeliveryRetry, &next, queue.Redact(cause)
		return rv.st.UpdateDelivery(rctx, tx, &d)
	})
	if err != nil {
		rv.log.Error("schedule delivery retry", "delivery", id, "err", err)
		return
	}
	rv.m.Deliveries.WithLabelValues(string(domain.DeliveryRetry)).Inc()
}
