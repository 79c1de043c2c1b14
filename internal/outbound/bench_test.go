package outbound_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/config"
	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// BenchmarkSendAcceptedToSent measures the send pipeline on each database,
// against the in-process emulator, in two shapes:
//
//   - sequential: one client accepts a send through POST /email/send and
//     waits until the worker records it sent before accepting the next, so
//     the latency is the pipeline's own (no queueing);
//   - burst: four clients accept b.N sends as fast as the API answers while
//     the worker executes them, so the throughput is the worker's capacity
//     and the latency is mostly time spent queued behind earlier sends.
//
// It reports sends/s (from the first acceptance to the last recorded send),
// accepts/s and the accepted→sent latency p50/p99/max as observed by the
// worker's Observe hook (publication createdAt to the commit of outcome
// sent).
//
//	go test ./internal/outbound -run '^$' -bench SendAcceptedToSent -benchtime 500x
func BenchmarkSendAcceptedToSent(b *testing.B) {
	for _, dialect := range []db.Dialect{db.SQLite, db.Postgres} {
		for _, shape := range []struct {
			name      string
			acceptors int
			waitEach  bool
		}{{"sequential", 1, true}, {"burst", 4, false}} {
			b.Run(string(dialect)+"/"+shape.name, func(b *testing.B) {
				url := ""
				if dialect == db.Postgres {
					url = dbtest.PostgresURL(b)
				}
				benchSends(b, url, shape.acceptors, shape.waitEach)
			})
		}
	}
}

// benchSends accepts b.N sends with acceptors concurrent clients; with
// waitEach, each client waits for its send to be recorded sent before the
// next acceptance.
func benchSends(b *testing.B, url string, acceptors int, waitEach bool) {
	e := testkit.NewEmailEnv(b, url, func(c *config.Config) {
		// Production logs at info; debug logging would dominate the profile.
		c.LogLevel = "info"
	})
	ep := e.Setup("bench", nil)
	endpoint := ep["id"].(string)
	// Lift the default per-recipient cap (30 per hour) for this recipient.
	e.Board.JSON("POST", "/api/companies/"+e.CompanyID+"/action-policies", map[string]any{"action": "email.recipient_sends",
		"effect": "allow", "rateLimitCount": 1_000_000, "rateLimitWindowSeconds": 3600}, 201)
	parent := testkit.ID(e.Board.JSON("POST", "/api/companies/"+e.CompanyID+"/issues", map[string]any{"title": "Outreach",
		"assigneeAgentId": e.AgentID}, 201))

	var mu sync.Mutex
	lat := make([]time.Duration, 0, b.N)
	sent := make(chan struct{}, b.N)
	// The hook is set before the first send is accepted; the HTTP round trip
	// of that acceptance orders this write before the worker's first read.
	e.SendWorker.Observe = func(d time.Duration) {
		mu.Lock()
		lat = append(lat, d)
		mu.Unlock()
		sent <- struct{}{}
	}

	keys := make(chan string, b.N)
	for range b.N {
		keys <- testkit.NewUUID()
	}
	close(keys)
	sendURL := e.URL() + "/api/companies/" + e.CompanyID + "/email/send"
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: acceptors}}
	defer client.CloseIdleConnections()
	deadline := time.After(2*time.Minute + time.Duration(b.N)*50*time.Millisecond)

	b.ResetTimer()
	cpu0 := processCPU()
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, acceptors)
	for range acceptors {
		wg.Go(func() {
			for key := range keys {
				body := map[string]any{"endpointId": endpoint, "parentIssueId": parent, "to": []string{"client@example.com"},
					"subject": "Benchmark " + key[:8], "text": "Benchmark send " + key, "idempotencyKey": key}
				if err := accept(client, sendURL, body); err != nil {
					errs <- err
					return
				}
				if !waitEach {
					continue
				}
				select {
				case <-sent:
				case <-deadline:
					errs <- fmt.Errorf("send %s was not recorded sent in time", key)
					return
				}
			}
		})
	}
	wg.Wait()
	accepted := time.Now()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
	if !waitEach {
		for i := range b.N {
			select {
			case <-sent:
			case <-deadline:
				b.Fatalf("only %d of %d sends were recorded sent", i, b.N)
			}
		}
	}
	finished := time.Now()
	cpu := processCPU() - cpu0
	b.StopTimer()

	if got := len(e.Em.Outbox("client@example.com", "")); got != b.N {
		b.Fatalf("emulator outbox holds %d messages, want %d", got, b.N)
	}
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(lat)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	pct := func(p float64) float64 { return ms(lat[int(p*float64(len(lat)-1))]) }
	b.ReportMetric(float64(b.N)/finished.Sub(start).Seconds(), "sends/s")
	b.ReportMetric(float64(b.N)/accepted.Sub(start).Seconds(), "accepts/s")
	b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/send")
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(ms(lat[len(lat)-1]), "max-ms")
}

// accept posts one send request and requires 202 Accepted.
func accept(client *http.Client, url string, body map[string]any) error {
	raw, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, url, bytes.NewReader(raw))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusAccepted {
		return fmt.Errorf("send %s: status %d: %s", body["idempotencyKey"], resp.StatusCode, out)
	}
	return nil
}

// processCPU is this process's user plus system CPU time: the server, the
// in-process emulator and the benchmark's client together (PostgreSQL's
// own processes are not counted).
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
