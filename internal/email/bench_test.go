package email_test

import (
	"fmt"
	"io"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// BenchmarkInboxList measures GET /companies/:id/email/inboxes with 50
// connected inboxes on each database: every summary computes its health
// (one statement of facts, the decryption of its runtime key, the agent's
// failed runs), which is what the overview page polls. It reports the
// request's latency and the server's CPU per request.
//
//	go test ./internal/email -run '^$' -bench InboxList -benchtime 200x
func BenchmarkInboxList(b *testing.B) {
	const inboxes = 50
	dbtest.EachURLBench(b, func(b *testing.B, _ db.Dialect, url string) {
		e := testkit.NewEmailEnv(b, url)
		for i := range inboxes {
			e.Setup(fmt.Sprintf("bench%02d", i), nil)
		}
		list := e.URL() + "/api/companies/" + e.CompanyID + "/email/inboxes"
		get := func() {
			resp, err := http.Get(list)
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				b.Fatalf("status %d", resp.StatusCode)
			}
		}
		get()
		cpu0 := processCPU()
		b.ResetTimer()
		start := time.Now()
		for range b.N {
			get()
		}
		elapsed := time.Since(start)
		cpu := processCPU() - cpu0
		b.StopTimer()
		b.ReportMetric(float64(elapsed.Microseconds())/1000/float64(b.N), "ms/list")
		b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/list")
		b.ReportMetric(float64(cpu.Microseconds())/float64(b.N*inboxes), "cpu-µs/inbox")
	})
}

// processCPU is this process's user and system CPU time so far (the
// server runs in-process).
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
