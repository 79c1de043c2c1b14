package emulator

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// BenchmarkInboundDeliveries measures end-to-end inbound throughput: mail
// delivered from outside (deliver endpoint over HTTP, or SMTP) until the
// matching message.received frame has reached one WebSocket subscriber.
// It reports deliveries/s; the target is at least 2,000/s on 2 cores.
func BenchmarkInboundDeliveries(b *testing.B) {
	b.Run("http", func(b *testing.B) { benchDeliveries(b, false) })
	b.Run("smtp", func(b *testing.B) { benchDeliveries(b, true) })
}

func benchDeliveries(b *testing.B, viaSMTP bool) {
	s, key := startTest(b, Options{SMTPListen: "127.0.0.1:0"})
	in := createInbox(b, s, key, "bench")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	conn, _, err := websocket.Dial(ctx, s.WebSocketURL(), &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + key}}})
	if err != nil {
		b.Fatalf("dial: %v", err)
	}
	defer conn.CloseNow()
	conn.SetReadLimit(16 << 20)
	sub, _ := json.Marshal(map[string]any{"type": "subscribe", "event_types": []string{"message.received"}, "inbox_ids": []string{in}})
	if err := conn.Write(ctx, websocket.MessageText, sub); err != nil {
		b.Fatalf("subscribe: %v", err)
	}
	if _, data, err := conn.Read(ctx); err != nil || !bytes.Contains(data, []byte(`"subscribed"`)) {
		b.Fatalf("subscribed: %v %s", err, data)
	}

	var received atomic.Int64
	all := make(chan struct{})
	target := int64(b.N)
	go func() {
		for {
			_, data, err := conn.Read(ctx)
			if err != nil {
				return
			}
			if bytes.Contains(data, []byte(`"message.received"`)) && received.Add(1) == target {
				close(all)
			}
		}
	}()

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	const workers = 8
	jobs := make(chan int, workers)
	var wg sync.WaitGroup
	var failures atomic.Int64
	url := s.URL() + "/_emulator/inboxes/" + esc(in) + "/deliver"
	b.ResetTimer()
	start := time.Now()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				if viaSMTP {
					raw := fmt.Sprintf("From: load@example.com\r\nTo: %s\r\nSubject: load %d\r\n\r\nbody %d\r\n", in, i, i)
					if err := sendSMTP(s.SMTPAddr(), "load@example.com", []string{in}, raw); err != nil {
						failures.Add(1)
					}
					continue
				}
				body := fmt.Sprintf(`{"from":"load@example.com","subject":"load %d","text":"body %d"}`, i, i)
				resp, err := client.Post(url, "application/json", bytes.NewReader([]byte(body)))
				if err != nil {
					failures.Add(1)
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					failures.Add(1)
				}
			}
		}()
	}
	for i := 0; i < b.N; i++ {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	if n := failures.Load(); n > 0 {
		b.Fatalf("%d deliveries failed", n)
	}
	select {
	case <-all:
	case <-time.After(60 * time.Second):
		b.Fatalf("only %d of %d events arrived", received.Load(), b.N)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "deliveries/s")
}
