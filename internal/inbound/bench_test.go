package inbound_test

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverdatabasesql"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/paperclipai/paperclipai/internal/config"
	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/emulator"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// benchEmails is the number of emails (over benchThreads threads) per
// pipeline run; riverJobs the number of no-op jobs per River run (more,
// since tuned River drains 600 in a tenth of a second on PostgreSQL).
const (
	benchEmails  = 600
	benchThreads = 60
	riverJobs    = 5000
)

// BenchmarkInbound measures the inbound pipeline end to end (emulator
// delivery → WebSocket → admission → processing → wake) on SQLite and on
// PostgreSQL, next to River's bare throughput of no-op jobs on a fresh
// database of the same kind in the same run, the baseline of a generic
// durable queue. River runs tuned for throughput (FetchCooldown 1 ms,
// FetchPollInterval 5 ms, 1,000 workers): with its defaults (100 ms
// cooldown, 100 workers) its fetch loop paces it at about 1,000 jobs/s
// whatever the machine can do. Run it with
//
//	go test ./internal/inbound -run '^$' -bench 'Inbound$' -benchtime 1x
//
// Each sub-benchmark reports emails/s (or jobs/s), CPU per email (or job)
// of this process and of the PostgreSQL server (cpuMeter), and, for the
// pipeline, the p50/p99 of each stage in milliseconds: admit (provider
// receipt → durable admission, which includes the WebSocket push), process
// (admission → the delivery processed: mail retained on the task, wake
// recorded) and wake (admission → wake recorded, the delivery's
// admissionToWakeMs). No stage can come out negative (durationMS).
func BenchmarkInbound(b *testing.B) {
	logLoad(b)
	for _, dialect := range []db.Dialect{db.SQLite, db.Postgres} {
		b.Run(string(dialect)+"/pipeline", func(b *testing.B) {
			for range b.N {
				benchPipeline(b, dialect)
			}
		})
		b.Run(string(dialect)+"/river", func(b *testing.B) {
			for range b.N {
				benchRiver(b, dialect)
			}
		})
	}
}

func benchURL(b *testing.B, dialect db.Dialect) string {
	if dialect == db.SQLite {
		return ""
	}
	return dbtest.PostgresURL(b)
}

func benchPipeline(b *testing.B, dialect db.Dialect) {
	b.StopTimer()
	bi := newBenchInbox(b, dialect)
	b.StartTimer()
	cpu := startCPU(b, pgHandle(bi.ee))
	reads := bi.restReads()
	rate, sent := bi.burst(b, "bench", benchEmails, benchThreads)
	cpu.report(b, benchEmails, "email")
	b.StopTimer()
	res := bi.stages(b, sent)
	b.ReportMetric(rate, "emails/s")
	b.ReportMetric(float64(bi.restReads()-reads)/benchEmails, "rest-reads/email")
	b.ReportMetric(0, "ns/op")
	report(b, "admit", res.admit)
	report(b, "process", res.process)
	report(b, "wake", res.wake)
	// The admission stage alone, from the worker's own histogram.
	if h := histogramQuantiles(bi.ee); h != "" {
		b.Logf("admission histogram: %s", h)
	}
}

// benchInbox is a server with one connected WebSocket inbox whose agent is
// paused: every wake is recorded (as a refused run) without starting
// hundreds of agent processes, so the figures are the pipeline's.
type benchInbox struct {
	ee            *testkit.EmailEnv
	epID, address string
}

func newBenchInbox(b *testing.B, dialect db.Dialect) *benchInbox {
	ee := testkit.NewEmailEnv(b, benchURL(b, dialect), infoLogs)
	ee.Board.JSON("PATCH", "/api/agents/"+ee.AgentID, map[string]any{"status": "paused"}, 200)
	sum := ee.Setup("bench", nil)
	bi := &benchInbox{ee: ee, epID: sum["id"].(string), address: sum["address"].(string)}
	testkit.Eventually(b, wait, "socket", func() bool { return ee.Inbound.SocketCaughtUp(bi.epID) })
	return bi
}

// restReads counts the provider REST requests the server made for the
// inbox so far (message, thread and attachment reads).
func (bi *benchInbox) restReads() int {
	return len(bi.ee.Em.Requests("/v0/inboxes/" + bi.address + "/"))
}

// stages are per-email latencies in milliseconds (see BenchmarkInbound).
type stages struct {
	admit, process, wake []float64
}

// burst delivers n emails over threads new threads (named by tag) as fast
// as the emulator accepts them, waits until every one is processed and
// returns the rate and when each was sent (dedup key → time), for stages.
// Why stages is the caller's: it reads every delivery of the inbox, so
// timed inside the burst it would slow each later burst a little more.
func (bi *benchInbox) burst(b *testing.B, tag string, n, threads int) (rate float64, sent map[string]time.Time) {
	start := time.Now()
	last := make([]string, threads)
	sent = map[string]time.Time{}
	for i := range n {
		th := i % threads
		at := time.Now()
		last[th] = bi.deliver(b, tag, th, last[th])
		sent["message.received:"+last[th]] = at
	}
	bi.drain(b, n, start)
	return float64(n) / time.Since(start).Seconds(), sent
}

// deliver delivers one email of thread th (replying to last, unless empty)
// and returns its provider message id.
func (bi *benchInbox) deliver(b *testing.B, tag string, th int, last string) string {
	req := emulator.DeliverRequest{From: fmt.Sprintf("%s%d@example.com", tag, th), Subject: fmt.Sprintf("%s %d", tag, th), Text: "benchmark body"}
	req.InReplyTo = last
	res, err := bi.ee.Em.Deliver(bi.address, req)
	if err != nil {
		b.Fatal(err)
	}
	return res.MessageID
}

// drain waits until the n deliveries admitted since since are processed.
// Why only those: counting every processed delivery of the inbox grows
// with each burst, and the database CPU of that poll is measured with
// the pipeline's; the (endpoint_id, state, received_at) index bounds
// this count to the burst.
func (bi *benchInbox) drain(b *testing.B, n int, since time.Time) {
	testkit.Eventually(b, 5*time.Minute, "pipeline drained", func() bool {
		var got int
		_ = bi.ee.DB.QueryRowContext(context.Background(), `SELECT COUNT(*) FROM email_deliveries
			WHERE endpoint_id = $1 AND state = 'processed' AND received_at >= $2`, bi.epID, since.UTC()).Scan(&got)
		return got >= n
	})
}

// stages reads the latencies of the deliveries in sent (dedup key → time
// the emulator was asked to deliver).
//
// Why process ends at the delivery's processed_at and not at its message
// row's created_at: processing one message of a thread retains the
// thread's other messages as context, so a later message's row often
// exists before its own delivery was even admitted, and created_at −
// received_at came out negative (a process-p50-ms of -1.838 on SQLite).
// processed_at is written when the delivery itself finishes, in the
// transaction that retains the mail and records the wake.
func (bi *benchInbox) stages(b *testing.B, sent map[string]time.Time) stages {
	var res stages
	rows, err := bi.ee.DB.QueryContext(context.Background(), `SELECT received_at, processed_at, admission_to_wake_ms, deduplication_key
		FROM email_deliveries WHERE endpoint_id = $1 AND state = 'processed'`, bi.epID)
	if err != nil {
		b.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var recv, processed time.Time
		var a2w int64
		var key string
		if err := rows.Scan(&recv, &processed, &a2w, &key); err != nil {
			b.Fatal(err)
		}
		t, ok := sent[key]
		if !ok {
			continue
		}
		res.admit = append(res.admit, durationMS(b, "admit", t, recv))
		res.process = append(res.process, durationMS(b, "process", recv, processed))
		res.wake = append(res.wake, float64(a2w))
	}
	if err := rows.Err(); err != nil {
		b.Fatal(err)
	}
	return res
}

// durationMS is to − from in milliseconds. Both are wall-clock instants of
// this machine (the database keeps microseconds, so from is truncated
// alike); a negative result means the stage is measured between the wrong
// events, and fails the benchmark instead of printing a meaningless
// figure.
func durationMS(b *testing.B, stage string, from, to time.Time) float64 {
	d := to.Sub(from.Truncate(time.Microsecond))
	if d < 0 {
		b.Fatalf("%s: negative duration %s (%s → %s): a measurement bug", stage, d, from.Format(time.RFC3339Nano), to.Format(time.RFC3339Nano))
	}
	return float64(d.Microseconds()) / 1000
}

// infoLogs runs the benchmark server at log level info, as in production
// (the test default, debug, formats a line per statement-heavy step).
func infoLogs(c *config.Config) { c.LogLevel = "info" }

// pgHandle is the server's database when it is PostgreSQL, for cpuMeter.
func pgHandle(ee *testkit.EmailEnv) *sql.DB {
	if ee.DB.Dialect != db.Postgres {
		return nil
	}
	return ee.DB.DB
}

func report(b *testing.B, stage string, v []float64) {
	if len(v) == 0 {
		return
	}
	slices.Sort(v)
	b.ReportMetric(v[len(v)*50/100], stage+"-p50-ms")
	b.ReportMetric(v[min(len(v)-1, len(v)*99/100)], stage+"-p99-ms")
}

// histogramQuantiles summarizes the admission histogram (count and mean).
func histogramQuantiles(ee *testkit.EmailEnv) string {
	mfs, err := ee.Metrics.Registry.Gather()
	if err != nil {
		return ""
	}
	for _, mf := range mfs {
		if mf.GetName() != "paperclip_email_admission_seconds" {
			continue
		}
		var n uint64
		var sum float64
		for _, m := range mf.GetMetric() {
			n += m.GetHistogram().GetSampleCount()
			sum += m.GetHistogram().GetSampleSum()
		}
		if n > 0 {
			return fmt.Sprintf("%d admissions, mean %.2f ms", n, sum/float64(n)*1000)
		}
	}
	return ""
}

type noopArgs struct{}

func (noopArgs) Kind() string { return "noop" }

type noopWorker struct{ river.WorkerDefaults[noopArgs] }

func (noopWorker) Work(context.Context, *river.Job[noopArgs]) error { return nil }

// benchRiver burns down riverJobs pre-inserted no-op jobs with River on a
// fresh database of the same kind: the bare throughput of a generic durable
// queue on this machine.
func benchRiver(b *testing.B, dialect db.Dialect) {
	b.StopTimer()
	ctx := context.Background()
	var d *db.DB
	var err error
	if dialect == db.SQLite {
		d, err = db.Open(ctx, "", filepath.Join(b.TempDir(), "river.db"))
	} else {
		d, err = db.Open(ctx, dbtest.PostgresURL(b), "")
	}
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	var driver riverdriver.Driver[*sql.Tx]
	if dialect == db.SQLite {
		driver = riversqlite.New(d.DB)
	} else {
		driver = riverdatabasesql.NewWithPgxListener(d.DB, d.Pool)
	}
	mig, err := rivermigrate.New(driver, nil)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := mig.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		b.Fatal(err)
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, noopWorker{})
	client, err := river.NewClient(driver, &river.Config{Queues: map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 1000}},
		FetchCooldown: time.Millisecond, FetchPollInterval: 5 * time.Millisecond,
		Workers: workers, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	params := make([]river.InsertManyParams, riverJobs)
	for i := range params {
		params[i] = river.InsertManyParams{Args: noopArgs{}}
	}
	if _, err := client.InsertMany(ctx, params); err != nil {
		b.Fatal(err)
	}
	// A buffer for every completion: a full one drops events.
	events, cancel := client.SubscribeConfig(&river.SubscribeConfig{Kinds: []river.EventKind{river.EventKindJobCompleted}, ChanSize: riverJobs})
	defer cancel()
	var pg *sql.DB
	if dialect == db.Postgres {
		pg = d.DB
	}
	b.StartTimer()
	cpu := startCPU(b, pg)
	start := time.Now()
	if err := client.Start(ctx); err != nil {
		b.Fatal(err)
	}
	for range riverJobs {
		select {
		case <-events:
		case <-time.After(2 * time.Minute):
			b.Fatal("river did not drain")
		}
	}
	elapsed := time.Since(start)
	cpu.report(b, riverJobs, "job")
	b.StopTimer()
	b.ReportMetric(float64(riverJobs)/elapsed.Seconds(), "jobs/s")
	b.ReportMetric(0, "ns/op")
	sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
	defer scancel()
	_ = client.Stop(sctx)
}
