package inbound_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/inbound"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// BenchmarkIdleInboxes measures what many connected but silent WebSocket
// inboxes cost on one replica: the worker's database statements per
// second (w.Queries(); on PostgreSQL also the server-wide committed
// transactions of the test database), provider REST calls per second (the
// emulator's request count) and the test process's RSS and Go heap (the
// process holds the emulator too). Run it with
//
//	go test ./internal/inbound -run '^$' -bench IdleInboxes -benchtime 1x
//
// PAPERCLIP_BENCH_INBOXES (default 1000), PAPERCLIP_BENCH_IDLE_WARMUP
// (default 65s, past the first periodic catch-up of every inbox) and
// PAPERCLIP_BENCH_IDLE_WINDOW (default 60s) change the inbox count, the
// wait before measuring and the measured window.
//
// The postgres/process sub-benchmark runs the server as its own
// `paperclipai run` process instead, so its RSS is the server's alone
// (the emulator stays in the test process); it reports committed database
// transactions, REST calls and the server's RSS.
func BenchmarkIdleInboxes(b *testing.B) {
	for _, dialect := range []db.Dialect{db.SQLite, db.Postgres} {
		b.Run(string(dialect), func(b *testing.B) {
			for range b.N {
				benchIdle(b, dialect)
			}
		})
	}
	b.Run("postgres/process", func(b *testing.B) {
		for range b.N {
			benchIdleProcess(b)
		}
	})
}

func benchIdleProcess(b *testing.B) {
	b.StopTimer()
	n := envInt("PAPERCLIP_BENCH_INBOXES", 1000)
	warmup := envDuration("PAPERCLIP_BENCH_IDLE_WARMUP", 65*time.Second)
	window := envDuration("PAPERCLIP_BENCH_IDLE_WINDOW", 60*time.Second)
	c := newCluster(b, dbtest.PostgresURL(b))
	// Production timing, except what the caller's environment sets.
	c.env = []string{"PAPERCLIP_EMAIL_LEASE_TTL=" + os.Getenv("PAPERCLIP_EMAIL_LEASE_TTL"),
		"PAPERCLIP_EMAIL_RECONNECT_MIN=", "PAPERCLIP_EMAIL_CATCHUP_INTERVAL=" + os.Getenv("PAPERCLIP_EMAIL_CATCHUP_INTERVAL")}
	p := c.start("")
	cl := testkit.NewClient(b, p.url)
	cl.JSON("PATCH", "/api/instance/settings", map[string]any{"experimental": map[string]any{"enableChatConnectors": true}}, 200)
	companyID := testkit.ID(cl.JSON("POST", "/api/companies", map[string]any{"name": "Idle Co"}, 201))
	agentID := testkit.ID(cl.JSON("POST", "/api/companies/"+companyID+"/agents", map[string]any{"name": "Mail Agent",
		"adapterType": "process", "adapterConfig": map[string]any{"command": "/bin/true"}}, 201))
	_, key := c.em.CreateOrganization("Idle Mail")
	eightAtATime(n, func(i int) {
		cl.JSON("POST", "/api/companies/"+companyID+"/email/inboxes", map[string]any{"assignedAgentId": agentID,
			"apiKey": key, "username": fmt.Sprintf("idle%04d", i), "idempotencyKey": testkit.NewUUID()}, 201)
	})
	testkit.Eventually(b, 5*time.Minute, "every inbox subscribed", func() bool { return c.em.WebSocketCount() == n })
	time.Sleep(warmup)
	st := c.openDB("")
	ctx := context.Background()
	xacts := func() int64 {
		var x int64
		_, _ = st.DB.ExecContext(ctx, `SELECT pg_stat_clear_snapshot()`)
		_ = st.DB.QueryRowContext(ctx, `SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = current_database()`).Scan(&x)
		return x
	}
	r0, x0 := c.em.RequestCount(), xacts()
	b.StartTimer()
	start := time.Now()
	time.Sleep(window)
	elapsed := time.Since(start).Seconds()
	b.StopTimer()
	r1, x1 := c.em.RequestCount(), xacts()
	b.ReportMetric(float64(x1-x0-2)/elapsed, "pg-xacts/s")
	b.ReportMetric(float64(r1-r0)/elapsed, "rest/s")
	b.ReportMetric(float64(rssOf(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid)))/1024, "server-rss-MB")
	b.ReportMetric(float64(n), "inboxes")
	b.ReportMetric(0, "ns/op")
}

func envInt(name string, def int) int {
	if v := envCount(name, 0); v > 0 {
		return v
	}
	return def
}

// envCount is the non-negative integer in the environment variable name,
// or def when it is unset or not one (envInt also refuses 0).
func envCount(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v >= 0 {
		return v
	}
	return def
}

func envDuration(name string, def time.Duration) time.Duration {
	if v, err := time.ParseDuration(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func benchIdle(b *testing.B, dialect db.Dialect) {
	b.StopTimer()
	n := envInt("PAPERCLIP_BENCH_INBOXES", 1000)
	warmup := envDuration("PAPERCLIP_BENCH_IDLE_WARMUP", 65*time.Second)
	window := envDuration("PAPERCLIP_BENCH_IDLE_WINDOW", 60*time.Second)
	ee := testkit.NewEmailEnv(b, benchURL(b, dialect))
	setupStart := time.Now()
	ids := make([]string, n)
	eightAtATime(n, func(i int) { ids[i] = ee.Setup(fmt.Sprintf("idle%04d", i), nil)["id"].(string) })
	b.Logf("%d inboxes set up in %s", n, time.Since(setupStart).Round(time.Millisecond))
	testkit.Eventually(b, 5*time.Minute, "every inbox subscribed and caught up", func() bool {
		if ee.Em.WebSocketCount() != n {
			return false
		}
		for _, id := range ids {
			if !ee.Inbound.SocketCaughtUp(id) {
				return false
			}
		}
		return true
	})
	b.Logf("all sockets subscribed and caught up %s after setup began", time.Since(setupStart).Round(time.Millisecond))
	time.Sleep(warmup)
	ctx := context.Background()
	pgXacts := func() int64 {
		if dialect != db.Postgres {
			return 0
		}
		// Why a snapshot clear: the statistics are cached per transaction.
		var x int64
		_, _ = ee.DB.ExecContext(ctx, `SELECT pg_stat_clear_snapshot()`)
		_ = ee.DB.QueryRowContext(ctx, `SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = current_database()`).Scan(&x)
		return x
	}
	q0, r0, x0 := ee.Inbound.Queries(), ee.Em.RequestCount(), pgXacts()
	b.StartTimer()
	start := time.Now()
	time.Sleep(window)
	elapsed := time.Since(start).Seconds()
	b.StopTimer()
	q1, r1, x1 := ee.Inbound.Queries(), ee.Em.RequestCount(), pgXacts()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	if path := os.Getenv("PAPERCLIP_BENCH_HEAP_PROFILE"); path != "" {
		writeHeapProfile(b, path+"."+string(dialect))
	}
	b.ReportMetric(float64(q1-q0)/elapsed, "stmts/s")
	b.ReportMetric(float64(r1-r0)/elapsed, "rest/s")
	if dialect == db.Postgres {
		// Minus the two statistics reads themselves.
		b.ReportMetric(float64(x1-x0-2)/elapsed, "pg-xacts/s")
	}
	b.ReportMetric(float64(rssKB())/1024, "rss-MB")
	b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "heap-MB")
	b.ReportMetric(float64(n), "inboxes")
	b.ReportMetric(0, "ns/op")
}

// writeHeapProfile writes the live heap (after a collection) to path, for
// go tool pprof: what 1,000 idle inboxes keep in memory, emulator included.
func writeHeapProfile(b *testing.B, path string) {
	runtime.GC()
	f, err := os.Create(path)
	if err != nil {
		b.Fatalf("heap profile: %v", err)
	}
	defer f.Close()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		b.Fatalf("heap profile: %v", err)
	}
	b.Logf("heap profile written to %s", path)
}

// rssKB returns this process's resident set size from /proc (0 elsewhere).
func rssKB() int64 { return rssOf("/proc/self/status") }

// rssOf returns the resident set size in a /proc status file, in kB.
func rssOf(status string) int64 {
	f, err := os.Open(status)
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb
		}
	}
	return 0
}

// eightAtATime runs f(0) … f(n-1), eight at a time, and waits for all:
// inbox setup through the API in parallel without flooding the server.
func eightAtATime(n int, f func(i int)) { inbound.Bounded(8, n, f) }
