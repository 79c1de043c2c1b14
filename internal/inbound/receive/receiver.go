// Package receive reads the email delivery queue: it takes an inbox's due
// deliveries, fetches their authoritative messages, groups them by provider
// thread and receives each thread in admission order under its lease
// (docs/email-pipeline.md, "Processing a thread"). Receiving follows the
// pure policy of decide.go: it retains the mail, creates the thread's task
// (task.go) and, when the message wakes the agent, records the wake
// (wake.go, idempotency key "email:<deliveryId>") in the same transaction,
// under a savepoint. If the wake fails, only the wake is rolled back: the
// mail commits with the wake pending and retryWake retries the wake alone.
//
// How prepared deliveries commit is a committer (commit.go): one delivery
// per transaction (oneByOne, the specification) or several threads in a
// shared transaction (grouped, the optimisation), checked by one contract
// test. A Receiver holds no lock and no state between batches beyond its
// metrics: the supervisor (internal/inbound) decides when an inbox's batch
// runs and keeps the leases it takes alive.
package receive

import (
	"context"
	"database/sql"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/paperclipai/paperclipai/internal/agentmail"
	"github.com/paperclipai/paperclipai/internal/attachment"
	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/email"
	"github.com/paperclipai/paperclipai/internal/heartbeat"
	"github.com/paperclipai/paperclipai/internal/store"
)

// Receipts is the send side as receiving sees it; *outbound.Service has
// both methods. They run inside the receiving transaction: an error rolls
// it back and the delivery is retried later.
type Receipts interface {
	// HandleReceipt applies a receipt (message.sent, .delivered, .bounced,
	// .complained or .rejected) to the send that produced msg, the
	// authoritative provider message the receipt refers to.
	HandleReceipt(ctx context.Context, tx *sql.Tx, ep domain.EmailEndpoint, ev agentmail.Event, msg *agentmail.Message) error
	// BindSent is told about every sent-labelled message of this inbox
	// found in a thread being received, so the send side can bind it to
	// its send (by the X-Paperclip-Publication-Id header). Such messages
	// are retained as context and never wake an agent.
	BindSent(ctx context.Context, tx *sql.Tx, ep domain.EmailEndpoint, msg *agentmail.Message) error
}

// Waker is the heartbeat as receiving sees it; *heartbeat.Service has both
// methods.
type Waker interface {
	// WakeupTx records a wake request inside tx.
	WakeupTx(ctx context.Context, tx *sql.Tx, agentID string, req heartbeat.WakeRequest) (domain.Run, bool, error)
	// Notify tells the scheduler, after commit, that a run was queued.
	Notify()
}

// WakeFunc records a wake request inside tx, like Waker.WakeupTx.
type WakeFunc = func(ctx context.Context, tx *sql.Tx, agentID string, req heartbeat.WakeRequest) (domain.Run, bool, error)

// Timing is the part of the supervisor's timing that reading the queue
// uses; the supervisor fills every field (inbound.DefaultTiming).
type Timing struct {
	// ThreadLeaseTTL bounds how long a dead replica blocks one provider
	// thread; the holder renews it at every fence.
	ThreadLeaseTTL time.Duration
	// BatchSize is the number of due deliveries one batch takes.
	BatchSize int
	// Concurrency is the number of message prefetches and of independent
	// threads processed at once.
	Concurrency int
	// TxConcurrency is the number of processing transactions run at once,
	// at most Concurrency.
	TxConcurrency int
	// ReopenLimit reopens by inbound replies are allowed per task within
	// ReopenWindow (docs/email-pipeline.md, "The reopen limiter").
	ReopenLimit  int
	ReopenWindow time.Duration
}

// Metrics are the receiving stage's collectors (the supervisor creates and
// registers them; see inbound.Metrics).
type Metrics struct {
	// Processing observes admission → mail retained.
	Processing prometheus.Histogram
	// Wake observes admission → wake request committed.
	Wake prometheus.Histogram
	// Deliveries counts finished deliveries by outcome.
	Deliveries *prometheus.CounterVec
	// Quarantined counts received mail quarantined, by reason.
	Quarantined *prometheus.CounterVec
}

// Options configure a Receiver.
type Options struct {
	Store *store.Store
	Email *email.Service
	// Wake records the agent's wakes (the heartbeat scheduler).
	Wake Waker
	// Receipts is the send side; nil marks receipts processed and ignores
	// our own sent messages.
	Receipts Receipts
	// Client is the provider client without a key; Batch derives a keyed
	// one with WithAPIKey.
	Client *agentmail.Client
	// Attachments is the content-addressed attachment store, with the
	// size bound and the importable media types.
	Attachments attachment.Store
	Logger      *slog.Logger
	Metrics     Metrics
	// Holder names this process in lease rows.
	Holder string
	Timing Timing
	// Querier runs the statements outside transactions, and Tx the
	// transactions: the supervisor's counted handles (inbound.Worker.Queries).
	Querier db.Querier
	Tx      func(ctx context.Context, fn func(tx *sql.Tx) error) error
	// Stopping reports that the supervisor is shutting down: no new
	// transaction starts and a fence fails as a lost lease.
	Stopping func() bool
	// Holding is told +1 when a batch takes its thread leases and -1 when it
	// releases them, so the supervisor renews them meanwhile.
	Holding func(delta int)
}

// Receiver reads the delivery queue. It has no mutex: everything it shares
// between goroutines is atomic or belongs to one batch.
type Receiver struct {
	o      Options
	st     *store.Store
	q      db.Querier
	log    *slog.Logger
	m      Metrics
	t      Timing
	wakeFn atomic.Pointer[WakeFunc]
	// commit is how prepared deliveries commit: grouped.
	commit committer
}

// New returns a Receiver.
func New(o Options) *Receiver {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	rv := &Receiver{o: o, st: o.Store, q: o.Querier, log: o.Logger, m: o.Metrics, t: o.Timing}
	if o.Wake != nil {
		f := WakeFunc(o.Wake.WakeupTx)
		rv.wakeFn.Store(&f)
	}
	rv.commit = grouped{rv}
	return rv
}

// SetWake replaces the wake request function, so a test can make a wake
// fail; production wiring is Options.Wake.
func (rv *Receiver) SetWake(f WakeFunc) { rv.wakeFn.Store(&f) }

// wakeRequest returns the wake request function (nil when none is set).
func (rv *Receiver) wakeRequest() WakeFunc {
	if f := rv.wakeFn.Load(); f != nil {
		return *f
	}
	return nil
}

// tx runs fn in a transaction through the supervisor's counted handle.
func (rv *Receiver) tx(ctx context.Context, fn func(tx *sql.Tx) error) error { return rv.o.Tx(ctx, fn) }

// stopping reports whether the supervisor is shutting down.
func (rv *Receiver) stopping() bool { return rv.o.Stopping != nil && rv.o.Stopping() }

// hold tells the supervisor about thread leases taken (+1) or released (-1).
func (rv *Receiver) hold(delta int) {
	if rv.o.Holding != nil {
		rv.o.Holding(delta)
	}
}

// Bounded runs fn(0) … fn(n-1) with at most limit running at once and
// returns when all have. The supervisor's scan uses it too.
func Bounded(limit, n int, fn func(i int)) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, max(1, limit))
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			fn(i)
		}()
	}
	wg.Wait()
}
