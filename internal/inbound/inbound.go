// Package inbound is the AgentMail email channel's receiving supervisor:
// it feeds the durable delivery queue (internal/inbound/queue) from the
// WebSocket transport under a database lease, from Svix-signed webhooks
// and from catch-up scans, decides when each inbox's work runs (the
// schedule, lease renewal, the replicas' share of sockets) and hands each
// due inbox's batch to the queue's reader (internal/inbound/receive), which
// serializes each provider thread under a fenced lease, creates the task,
// retains the mail and records the wake.
//
// # Flow
//
// Both transports and the catch-up scan only admit (admission.go): they
// normalize the provider event, check the inbox and insert one
// email_deliveries row with ON CONFLICT DO NOTHING on the (inbox, kind:message
// id) key (queue.AdmitTx), then signal the worker after commit. A visit of
// a due inbox runs receive.Receiver.Batch, which fetches the authoritative
// messages, groups due deliveries by provider thread and processes each
// thread in admission order under the lease "email-thread:<threadId>",
// fencing the lease in the same transaction as every side effect.
//
// # Scheduling
//
// The worker never polls while idle and never visits an inbox that has
// nothing due (schedule.go). It keeps an in-memory schedule of every
// active inbox, fed by two indexed statements across all inboxes (the
// active inboxes with their credential version, and the inboxes with
// waiting deliveries) that run at start, on a general signal (a lifecycle
// change) and every 60 s as a safety net. A wake names the inbox that
// changed: an admission wakes only its inbox, in-process and across
// replicas (the PostgreSQL notification's payload is the inbox id). The
// active inbox check is cached per credential version. Socket leases are
// renewed in one statement per renewal period, and completed catch-up
// scans are recorded in one statement per second.
package inbound

import (
	"context"
	"database/sql"
	"fmt"
	"hash/fnv"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/paperclipai/paperclipai/internal/agentmail"
	"github.com/paperclipai/paperclipai/internal/attachment"
	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/email"
	"github.com/paperclipai/paperclipai/internal/inbound/receive"
	"github.com/paperclipai/paperclipai/internal/notify"
	"github.com/paperclipai/paperclipai/internal/store"
)

// Receipts is the send side as receiving sees it (receive.Receipts);
// *outbound.Service has both methods.
type Receipts = receive.Receipts

// Waker is the heartbeat as receiving sees it (receive.Waker);
// *heartbeat.Service has both methods.
type Waker = receive.Waker

// Timing holds the worker's lease, catch-up and reconnect parameters. Zero
// fields take the defaults of DefaultTiming.
type Timing struct {
	// SocketLeaseTTL bounds how long a dead replica keeps an inbox's socket
	// lease, its catch-up leases and its membership; SocketRenew is how
	// often the holder renews all of its leases, thread leases included,
	// in one statement (renewLoop).
	//
	// Why short leases renewed in batch rather than PostgreSQL session
	// advisory locks: every side effect under a lease is fenced inside its
	// own transaction (store.Lease.Fence), on whatever pooled connection
	// that transaction runs; a session lock lives on one dedicated
	// connection and cannot be proved from another, and it would need a
	// second mechanism on SQLite. Why a second and not less: the renewal
	// is nearly all an idle replica's database work, so its period sets
	// the cluster's idle statement rate (docs/benchmarks.md, "Scale out:
	// stable shares, 10,000 inboxes, the new-thread tail (issue 34)").
	// Why 6 s and not the earlier 3 s: a renewal must end one period
	// before its leases lapse, counted from the start of the last good
	// one, or the replica closes every socket. With 3 s that left a
	// renewal about one second; with 10,000 inboxes on three replicas on
	// two cores a renewal took that long in the setup storm, one replica
	// closed all its sockets, and the hand-overs back to it kept the
	// cluster saturated for minutes. 6 s leaves four seconds; a dead
	// replica's sockets move about 6–7 s after its death.
	SocketLeaseTTL time.Duration
	SocketRenew    time.Duration
	// ThreadLeaseTTL bounds how long a dead replica blocks one provider
	// thread; the holder renews it at every fence and, by this TTL, with
	// its socket leases.
	ThreadLeaseTTL time.Duration
	// CatchupInterval is the period of the maintenance catch-up scan of an
	// inbox whose transport is not known to be healthy.
	CatchupInterval time.Duration
	// CatchupHealthyInterval is the period of that scan while the
	// transport is healthy (this process's socket subscribed, or a signed
	// webhook verified within the interval). Unset, it is 10 ×
	// CatchupInterval (10 minutes by default), so a test's short
	// CatchupInterval shortens it too.
	CatchupHealthyInterval time.Duration
	// CatchupOverlap is subtracted from the receipt-time checkpoint.
	CatchupOverlap time.Duration
	// SubscribeTimeout bounds the wait for the subscription acknowledgement.
	SubscribeTimeout time.Duration
	// ReconnectMin and ReconnectMax bound the socket's exponential backoff.
	ReconnectMin time.Duration
	ReconnectMax time.Duration
	// BatchSize is the number of due deliveries one tick takes per inbox.
	BatchSize int
	// Concurrency is the number of message prefetches and of independent
	// threads processed at once per inbox.
	Concurrency int
	// TxConcurrency is the number of processing transactions (retention
	// and wake) run at once per inbox, at most Concurrency. It is lower
	// than Concurrency because beyond a few, concurrent transactions of
	// one inbox only compete for the CPU and the database (the agent's
	// row is only share-locked by a wake, see store.AgentShared), while
	// provider I/O still benefits from Concurrency.
	TxConcurrency int
	// ReopenLimit is how many times inbound replies may reopen one done
	// task within ReopenWindow (docs/email-pipeline.md, "The reopen limiter"); later replies
	// in the window are retained and the task stays done.
	ReopenLimit  int
	ReopenWindow time.Duration
}

// DefaultTiming is the production timing (docs/email-pipeline.md, "Timing").
var DefaultTiming = Timing{
	SocketLeaseTTL:         6 * time.Second,
	SocketRenew:            time.Second,
	ThreadLeaseTTL:         3 * time.Second,
	CatchupInterval:        60 * time.Second,
	CatchupHealthyInterval: 10 * time.Minute,
	CatchupOverlap:         5 * time.Minute,
	SubscribeTimeout:       30 * time.Second,
	ReconnectMin:           2 * time.Second,
	ReconnectMax:           60 * time.Second,
	BatchSize:              100,
	Concurrency:            8,
	TxConcurrency:          4,
	ReopenLimit:            5,
	ReopenWindow:           time.Hour,
}

func (t Timing) withDefaults() Timing {
	d := DefaultTiming
	set := func(v *time.Duration, def time.Duration) {
		if *v <= 0 {
			*v = def
		}
	}
	set(&t.SocketLeaseTTL, d.SocketLeaseTTL)
	set(&t.SocketRenew, d.SocketRenew)
	set(&t.ThreadLeaseTTL, d.ThreadLeaseTTL)
	set(&t.CatchupInterval, d.CatchupInterval)
	set(&t.CatchupHealthyInterval, 10*t.CatchupInterval)
	set(&t.CatchupOverlap, d.CatchupOverlap)
	set(&t.SubscribeTimeout, d.SubscribeTimeout)
	set(&t.ReconnectMin, d.ReconnectMin)
	set(&t.ReconnectMax, d.ReconnectMax)
	set(&t.ReopenWindow, d.ReopenWindow)
	if t.ReopenLimit <= 0 {
		t.ReopenLimit = d.ReopenLimit
	}
	if t.BatchSize <= 0 {
		t.BatchSize = d.BatchSize
	}
	if t.Concurrency <= 0 {
		t.Concurrency = d.Concurrency
	}
	if t.TxConcurrency <= 0 {
		t.TxConcurrency = d.TxConcurrency
	}
	t.TxConcurrency = min(t.TxConcurrency, t.Concurrency)
	return t
}

// Options configure a Worker.
type Options struct {
	Store *store.Store
	Email *email.Service
	// Wake records the agent's wakes (the heartbeat scheduler).
	Wake Waker
	// Receipts is the send side; nil marks receipts processed and ignores
	// our own sent messages.
	Receipts Receipts
	// Work wakes the worker: admissions signal it, and so do the email
	// service when an inbox starts or stops and the send side after
	// admitting a sent message. nil creates a private signal.
	Work notify.Signal
	// Client is the provider client without a key; the worker derives keyed
	// clients with WithAPIKey.
	Client *agentmail.Client
	// WebSocketURL is the provider WebSocket URL.
	WebSocketURL string
	// Attachments is the content-addressed attachment store, with the
	// size bound and the importable media types.
	Attachments attachment.Store
	Logger      *slog.Logger
	// Metrics receives the stage histograms; nil creates unregistered ones.
	Metrics *Metrics
	// Holder names this process in lease rows.
	Holder string
	// ExclusiveDatabase is true when no other process can share the
	// database (SQLite under the home lock): receiving leases found at start
	// then belong to a dead predecessor and are cleared at once.
	ExclusiveDatabase bool
	Timing            Timing
}

// Worker runs the inbound pipeline of one process.
type Worker struct {
	o   Options
	st  *store.Store
	db  *db.DB
	q   *countingQuerier
	log *slog.Logger
	m   *Metrics
	t   Timing
	// recv reads the queue: an inbox's visit runs its Batch.
	recv *receive.Receiver
	// scanOffset shifts this process's grid of catch-up slots (nextScan)
	// by a hash of its holder name: the replicas share one wall clock,
	// and on an unshifted grid all of them woke for their slot rounds at
	// the same instant every second.
	scanOffset time.Duration

	mu      sync.Mutex
	sockets map[string]*socketState
	// inboxes is the schedule of every active inbox (schedule.go); named
	// collects the inboxes woken by name since the last round (wakeFor),
	// finished the catch-up records waiting for their batched write.
	inboxes  map[string]*inboxState
	named    map[string]int
	finished map[string]time.Time
	wakeSig  notify.Signal
	flushing bool
	// rescanSig asks rescanLoop for a read; rescanned tells the loop one
	// finished, pendingRead holds it until the loop applies it, reads
	// numbers the applied ones and unknown holds named wakes for inboxes
	// no read had listed yet (schedule.go).
	rescanSig   notify.Signal
	rescanned   notify.Signal
	pendingRead *rescanRead
	reads       uint64
	unknown     map[string]unknownWake
	// strayTokens are socket lease tokens the last batch renewal renewed
	// that no running socket had (see closeSocketsLost).
	strayTokens map[string]bool
	// workLeases counts the catch-up and thread lease sets this process
	// holds now, so renewLoop renews while any is held.
	workLeases atomic.Int64
	// elsewhere maps the inboxes whose socket another process held at the
	// last batch renewal to that process.
	elsewhere map[string]string
	// own is the socket ownership state (ownership.go).
	own ownership
	// renewals counts completed batch renewals (Renewals).
	renewals atomic.Int64
	// replicas is the number of live replicas the last batch renewal
	// counted (socketShareLocked).
	replicas atomic.Int64

	ctx      context.Context
	cancel   context.CancelFunc
	stopping atomic.Bool
	wg       sync.WaitGroup
	started  bool
}

// New returns a Worker; call Start to begin receiving.
func New(o Options) *Worker {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Metrics == nil {
		o.Metrics = NewMetrics(nil)
	}
	if o.Work == nil {
		o.Work = notify.New()
	}
	w := &Worker{o: o, st: o.Store, db: o.Store.DB, log: o.Logger, m: o.Metrics, t: o.Timing.withDefaults(),
		sockets: map[string]*socketState{}, inboxes: map[string]*inboxState{}, named: map[string]int{},
		finished: map[string]time.Time{}, wakeSig: notify.New(), rescanSig: notify.New(), rescanned: notify.New(),
		unknown: map[string]unknownWake{}}
	w.q = &countingQuerier{db: o.Store.DB}
	h := fnv.New64a()
	_, _ = h.Write([]byte(o.Holder))
	w.scanOffset = time.Duration(h.Sum64() % uint64(time.Second))
	w.recv = receive.New(receive.Options{Store: o.Store, Email: o.Email, Wake: o.Wake, Receipts: o.Receipts,
		Client: o.Client, Attachments: o.Attachments, Logger: o.Logger, Holder: o.Holder,
		Metrics: receive.Metrics{Processing: w.m.Processing, Wake: w.m.Wake, Deliveries: w.m.Deliveries, Quarantined: w.m.Quarantined},
		Timing: receive.Timing{ThreadLeaseTTL: w.t.ThreadLeaseTTL, BatchSize: w.t.BatchSize, Concurrency: w.t.Concurrency,
			TxConcurrency: w.t.TxConcurrency, ReopenLimit: w.t.ReopenLimit, ReopenWindow: w.t.ReopenWindow},
		Querier: w.q, Tx: w.q.tx, Stopping: w.stopping.Load,
		Holding: func(delta int) { w.workLeases.Add(int64(delta)) }})
	return w
}

// Queries returns the number of database round trips the worker has made
// on its own behalf (statements outside transactions plus transactions
// begun). It exists so tests can prove that an idle worker is silent.
func (w *Worker) Queries() int64 { return w.q.n.Load() }

// Notify wakes the worker to rescan every active inbox now (two
// statements) and do what is due. It never blocks; several signals before
// the worker runs collapse into one round.
func (w *Worker) Notify() { w.o.Work.Notify() }

// Start begins receiving and processing and returns at once; ctx bounds
// only the start, the worker runs until Shutdown. On an exclusive database
// it first clears receiving leases left by a dead predecessor, so threads
// are not blocked until those leases expire.
func (w *Worker) Start(ctx context.Context) error {
	if w.o.ExclusiveDatabase {
		if err := w.st.DeleteReceivingLeases(ctx, w.q); err != nil {
			return fmt.Errorf("inbound: %w", err)
		}
	}
	w.ctx, w.cancel = context.WithCancel(context.WithoutCancel(ctx))
	w.started = true
	if w.db.Dialect == db.Postgres && w.db.Pool != nil {
		w.wg.Add(1)
		go w.listen(w.ctx)
	}
	w.wg.Add(3)
	go w.loop(w.ctx)
	go w.rescanLoop(w.ctx)
	go w.renewLoop(w.ctx)
	return nil
}

// Shutdown stops the worker: it closes this process's sockets, waits for
// the current tick to end and releases only this process's leases (socket
// tokens and thread tokens it holds), so a successor need not wait for them
// to expire. It must run before the database closes.
func (w *Worker) Shutdown(ctx context.Context) error {
	if !w.started {
		return nil
	}
	w.stopping.Store(true)
	w.cancel()
	w.closeSocketsExcept(nil)
	done := make(chan struct{})
	go func() {
		w.wg.Wait()
		// Scan records still queued after a failed write.
		w.flushCatchups(ctx)
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("inbound: shutdown: %w", ctx.Err())
	}
}

// countingQuerier is the worker's handle for statements outside a
// transaction; it counts them so an idle worker can be shown to be silent.
type countingQuerier struct {
	db *db.DB
	n  atomic.Int64
}

// tx runs fn in a transaction, counted as one round trip.
func (c *countingQuerier) tx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	c.n.Add(1)
	return c.db.Tx(ctx, fn)
}

// ExecContext implements db.Querier.
func (c *countingQuerier) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	c.n.Add(1)
	return c.db.ExecContext(ctx, query, args...)
}

// QueryContext implements db.Querier.
func (c *countingQuerier) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	c.n.Add(1)
	return c.db.QueryContext(ctx, query, args...)
}

// QueryRowContext implements db.Querier.
func (c *countingQuerier) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	c.n.Add(1)
	return c.db.QueryRowContext(ctx, query, args...)
}
