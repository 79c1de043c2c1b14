package inbound_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// BenchmarkInboundSteady delivers a steady 100 emails/s for 30 s to one
// WebSocket inbox on each database, in two kinds of mail, and reports the
// latency of each email at a rate the pipeline sustains:
//
//   - replies: replies to 300 existing threads (their first messages are
//     delivered before the measurement, at the same pace);
//   - new-threads: every email a new thread from a new sender, so every
//     one creates a task (the case the operator measured).
//
// For each it reports, in milliseconds, p50, p99 and max of: admit
// (provider delivery → durable admission, which includes the WebSocket
// push), a2w (admission → wake recorded, the delivery's
// admissionToWakeMs; target p99 < 50 ms) and e2e, end to end: the
// emulator's deliver call → the wake recorded (admit + a2w), the figure
// an operator measures from outside. Run it with
//
//	go test ./internal/inbound -run '^$' -bench InboundSteady -benchtime 1x
//
// PAPERCLIP_BENCH_STEADY_RATE (emails/s, default 100) and
// PAPERCLIP_BENCH_STEADY_SECONDS (default 30) change the load; figures
// are only meaningful on a quiet machine (docs/benchmarks.md).
// PAPERCLIP_BENCH_STAGES=1 also logs each stage gap of the worker's trace
// (admitted, picked, prepared, transaction begun, fenced, woken,
// committed), and PAPERCLIP_BENCH_STATEMENTS=1 the statements run.
func BenchmarkInboundSteady(b *testing.B) {
	logLoad(b)
	rate := envInt("PAPERCLIP_BENCH_STEADY_RATE", 100)
	seconds := envInt("PAPERCLIP_BENCH_STEADY_SECONDS", 30)
	// 300 threads at the default load; fewer in a short run, so every
	// measured email is still a reply.
	threads := min(300, rate*seconds)
	for _, dialect := range []db.Dialect{db.SQLite, db.Postgres} {
		for _, kind := range []string{"replies", "new-threads"} {
			b.Run(string(dialect)+"/"+kind, func(b *testing.B) {
				for range b.N {
					b.StopTimer()
					bi := newBenchInbox(b, dialect)
					n := rate * seconds
					interval := time.Second / time.Duration(rate)
					last := make([]string, threads)
					if kind == "replies" {
						// The threads' first messages, outside the figures.
						start := time.Now()
						for th := range threads {
							time.Sleep(time.Until(start.Add(time.Duration(th) * interval)))
							last[th] = bi.deliver(b, "steady", th, "")
						}
						bi.drain(b, threads, start)
					}
					sent := map[string]time.Time{}
					b.StartTimer()
					var clock *stageClock
					if stageProfile() {
						clock = startStages()
					}
					cpu := startCPU(b, pgHandle(bi.ee))
					start := time.Now()
					for i := range n {
						// Paced against the start, so a slow delivery does
						// not lower the rate.
						time.Sleep(time.Until(start.Add(time.Duration(i) * interval)))
						at := time.Now()
						var id string
						if kind == "replies" {
							th := i % threads
							id = bi.deliver(b, "steady", th, last[th])
							last[th] = id
						} else {
							// A new sender and a new subject: a new thread.
							id = bi.deliver(b, "fresh", i, "")
						}
						sent["message.received:"+id] = at
					}
					offered := float64(n) / time.Since(start).Seconds()
					bi.drain(b, n, start)
					cpu.report(b, n, "email")
					b.StopTimer()
					if clock != nil {
						clock.stop()
						clock.log(b, bi, start)
					}
					res := bi.stages(b, sent)
					e2e := make([]float64, len(res.wake))
					for i := range res.wake {
						e2e[i] = res.admit[i] + res.wake[i]
					}
					b.ReportMetric(offered, "offered-emails/s")
					b.ReportMetric(0, "ns/op")
					reportMax(b, "admit", res.admit)
					reportMax(b, "a2w", res.wake)
					reportMax(b, "e2e", e2e)
				}
			})
		}
	}
}

// reportMax is report plus the maximum.
func reportMax(b *testing.B, stage string, v []float64) {
	if len(v) == 0 {
		return
	}
	report(b, stage, v)
	b.ReportMetric(slices.Max(v), stage+"-max-ms")
}

// BenchmarkInboundIdleInboxes measures, in one run on each database, the
// burst throughput of one inbox (600 emails over 60 threads, three bursts)
// alone and again (three more bursts) with 1,000 idle WebSocket inboxes
// connected beside it; the ratio of the median rates (target ≥ 0.9) shows
// whether the cost of an email grows with the number of inboxes. Why three
// bursts a phase: one burst lasts under a second on a fast machine, so one
// lease renewal or garbage collection more or less in it moves its rate by
// several percent; the median of three does not follow one such burst. The
// later bursts meet more rows in every table, which only counts against
// the crowded phase. Run it with
//
//	go test ./internal/inbound -run '^$' -bench InboundIdleInboxes -benchtime 1x
func BenchmarkInboundIdleInboxes(b *testing.B) {
	logLoad(b)
	// PAPERCLIP_BENCH_IDLE_INBOXES=0 is the control: the same six bursts
	// with nothing added between them, which shows what the growing
	// tables alone cost the later three.
	idle, bursts := envCount("PAPERCLIP_BENCH_IDLE_INBOXES", 1000), 3
	for _, dialect := range []db.Dialect{db.SQLite, db.Postgres} {
		b.Run(string(dialect), func(b *testing.B) {
			for range b.N {
				b.StopTimer()
				bi := newBenchInbox(b, dialect)
				b.StartTimer()
				alone := bi.phase(b, "alone", bursts)
				b.StopTimer()
				setup := time.Now()
				addIdleInboxes(b, bi.ee, idle)
				testkit.Eventually(b, 5*time.Minute, "idle sockets", func() bool { return bi.ee.Em.WebSocketCount() == idle+1 })
				// Let the new inboxes' first catch-up scans end, so the
				// crowded bursts meet them idle.
				time.Sleep(5 * time.Second)
				b.Logf("%d idle inboxes connected in %s", idle, time.Since(setup).Round(time.Millisecond))
				b.StartTimer()
				crowded := bi.phase(b, "crowded", bursts)
				b.StopTimer()
				b.ReportMetric(alone.rate, "alone-emails/s")
				b.ReportMetric(crowded.rate, "crowded-emails/s")
				b.ReportMetric(crowded.rate/alone.rate, "ratio")
				alone.report(b, "alone")
				crowded.report(b, "crowded")
				b.ReportMetric(0, "ns/op")
			}
		})
	}
}

// phaseResult is the median rate of a phase's bursts and the CPU they
// used per email (db < 0 when unknown).
type phaseResult struct {
	rate     float64
	self, db time.Duration
	emails   int
}

// phase runs n bursts (tagged tag1…) and measures them together.
func (bi *benchInbox) phase(b *testing.B, tag string, n int) phaseResult {
	cpu := startCPU(b, pgHandle(bi.ee))
	start := time.Now()
	q0, r0, steal := bi.ee.Inbound.Queries(), bi.ee.Em.RequestCount(), stealTime()
	rates := make([]float64, n)
	for i := range n {
		rates[i], _ = bi.burst(b, fmt.Sprintf("%s%d", tag, i+1), benchEmails, benchThreads)
	}
	self, dbCPU := cpu.stop()
	emails := float64(n * benchEmails)
	b.ReportMetric(float64(bi.ee.Inbound.Queries()-q0)/emails, tag+"-stmts/email")
	b.ReportMetric(float64(bi.ee.Em.RequestCount()-r0)/emails, tag+"-rest/email")
	b.Logf("%s: %.0f emails/s per burst (%s to %s, %s of CPU stolen by the host)", tag, rates,
		start.UTC().Format("15:04:05.000"), time.Now().UTC().Format("15:04:05.000"), stealTime()-steal)
	slices.Sort(rates)
	return phaseResult{rate: rates[n/2], self: self, db: dbCPU, emails: n * benchEmails}
}

// report adds the phase's CPU per email (all, and the database's part).
func (r phaseResult) report(b *testing.B, tag string) {
	per := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / float64(r.emails) }
	b.ReportMetric(per(r.self+max(r.db, 0)), tag+"-cpu-ms/email")
	if r.db >= 0 {
		b.ReportMetric(per(r.db), tag+"-db-cpu-ms/email")
	}
}

// addIdleInboxes connects n more WebSocket inboxes for the env's agent,
// four setups at a time.
func addIdleInboxes(b *testing.B, ee *testkit.EmailEnv, n int) {
	var wg sync.WaitGroup
	errs := make(chan error, n)
	next := make(chan int)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				body := map[string]any{"assignedAgentId": ee.AgentID, "apiKey": ee.OrgKey, "username": fmt.Sprintf("idle%d", i),
					"idempotencyKey": testkit.NewUUID()}
				st, raw := ee.Board.Do("POST", "/api/companies/"+ee.CompanyID+"/email/inboxes", body)
				if st != 201 {
					var msg json.RawMessage = raw
					errs <- fmt.Errorf("setup idle inbox %d: %d %s", i, st, msg)
				}
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
}
