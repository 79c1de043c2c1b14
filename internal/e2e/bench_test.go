package e2e_test

import (
	"net/http"
	"os"
	"os/exec"
	"sort"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// BenchmarkColdStart measures `paperclipai run` on a fresh SQLite home from
// exec to the first healthy /api/health answer (migrations, vault key
// creation and listener included).
func BenchmarkColdStart(b *testing.B) {
	bin := testkit.Binary(b)
	var total time.Duration
	for b.Loop() {
		home := b.TempDir()
		addr := freePort(b)
		start := time.Now()
		cmd := exec.Command(bin, "run", "--home", home, "--listen", addr)
		cmd.Env = os.Environ()
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		for {
			resp, err := http.Get("http://" + addr + "/api/health")
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == 200 {
					break
				}
			}
			if time.Since(start) > 30*time.Second {
				b.Fatal("server did not become healthy")
			}
			time.Sleep(2 * time.Millisecond)
		}
		total += time.Since(start)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/start")
}

// BenchmarkWakeToStart measures, on each database, the time from a wakeup
// being recorded (run createdAt) to the scheduler starting it (startedAt),
// for sequential wakes of a trivial process agent. It reports p50 and p99.
func BenchmarkWakeToStart(b *testing.B) {
	dbtest.EachURLBench(b, func(b *testing.B, _ db.Dialect, url string) {
		inst := testkit.Start(b, testkit.Config(b, url))
		c := testkit.NewClient(b, inst.URL())
		cid := testkit.ID(c.JSON("POST", "/api/companies", map[string]any{"name": "Bench"}, 201))
		aid := testkit.ID(c.JSON("POST", "/api/companies/"+cid+"/agents", map[string]any{"name": "Noop", "adapterType": "process",
			"adapterConfig": map[string]any{"command": "/bin/true"}}, 201))
		var lat []time.Duration
		for b.Loop() {
			run := c.JSON("POST", "/api/agents/"+aid+"/wakeup", map[string]any{"reason": "bench"}, 202)
			id := testkit.ID(run)
			var got map[string]any
			for {
				got = c.JSON("GET", "/api/heartbeat-runs/"+id, nil, 200)
				if got["status"] == "succeeded" || got["status"] == "failed" {
					break
				}
				time.Sleep(time.Millisecond)
			}
			created, _ := time.Parse(time.RFC3339Nano, got["createdAt"].(string))
			started, _ := time.Parse(time.RFC3339Nano, got["startedAt"].(string))
			lat = append(lat, started.Sub(created))
		}
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		pct := func(p float64) float64 {
			return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000
		}
		b.ReportMetric(pct(0.50), "p50-ms")
		b.ReportMetric(pct(0.99), "p99-ms")
	})
}
