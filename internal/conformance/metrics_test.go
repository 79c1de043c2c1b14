package conformance_test

import (
	"bufio"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/emulator"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// scrape reads /metrics into "name{labels}" → value (labels as exposed).
func (e *env) scrape() map[string]float64 {
	e.t.Helper()
	resp, err := http.Get(e.URL() + "/metrics")
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		e.t.Fatalf("/metrics: %d %s", resp.StatusCode, b)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			e.t.Fatalf("metric line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

// The stage metrics after real traffic: a received message (admission,
// processing, admission → wake, wake → run start, deliveries by outcome),
// replies through to their receipts (accepted → sent, sent → delivered,
// sends and receipts by kind), the sockets gauge and the database gauges
// of inboxes by status and open sends.
func TestStageMetricsAfterTraffic(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := newEnv(t, url)
		e.connect("measured", nil)
		task := e.inboundTask("Measure me")
		testkit.Eventually(t, wait, "the run to start", func() bool {
			w := e.wakes(task)
			return len(w) == 1 && w[0]["startedAt"] != nil
		})
		ok := e.reply(task, "measured reply")
		e.Board.JSON("POST", e.sendPath(), ok, 202)
		e.waitOutcome(ok["idempotencyKey"].(string), "delivered")
		bad := e.newEmail("complain@example.com", "Complaint bait")
		e.Board.JSON("POST", e.sendPath(), bad, 202)
		e.waitOutcome(bad["idempotencyKey"].(string), "failed")
		e.Em.AddFault(emulator.Fault{Match: emulator.FaultMatch{Operation: "reply_message"}, Status: 429, Code: "rate_limit_exceeded",
			Headers: map[string]string{"Retry-After": "60"}, Times: 1})
		stuck := e.reply(task, "rate limited")
		e.Board.JSON("POST", e.sendPath(), stuck, 202)
		e.waitOutcome(stuck["idempotencyKey"].(string), "uncertain")
		time.Sleep(10 * time.Millisecond)

		m := e.scrape()
		atLeast := map[string]float64{
			`paperclip_email_admission_seconds_count{source="websocket"}`:    1,
			`paperclip_email_processing_seconds_count`:                       1,
			`paperclip_email_admission_to_wake_seconds_count`:                1,
			`paperclip_heartbeat_wake_to_start_seconds_count`:                1,
			`paperclip_email_deliveries_total{outcome="processed"}`:          1,
			`paperclip_email_send_accepted_to_sent_seconds_count`:            2,
			`paperclip_email_send_sent_to_delivered_seconds_count`:           1,
			`paperclip_email_sends_total{outcome="accepted"}`:                3,
			`paperclip_email_sends_total{outcome="sent"}`:                    2,
			`paperclip_email_sends_total{outcome="delivered"}`:               1,
			`paperclip_email_sends_total{outcome="failed"}`:                  1,
			`paperclip_email_sends_total{outcome="uncertain"}`:               1,
			`paperclip_email_send_receipts_total{kind="message.delivered"}`:  1,
			`paperclip_email_send_receipts_total{kind="message.complained"}`: 1,
			`paperclip_email_send_oldest_open_seconds{outcome="uncertain"}`:  0.001,
		}
		for name, min := range atLeast {
			if v, ok := m[name]; !ok || v < min {
				t.Errorf("%s = %v (present %v), want at least %v", name, v, ok, min)
			}
		}
		exactly := map[string]float64{
			`paperclip_email_sockets_connected`:                          1,
			`paperclip_email_stats_up`:                                   1,
			`paperclip_email_inboxes{mode="websocket",status="active"}`:  1,
			`paperclip_email_inboxes{mode="webhook",status="active"}`:    0,
			`paperclip_email_inboxes{mode="websocket",status="paused"}`:  0,
			`paperclip_email_sends_open{outcome="uncertain"}`:            1,
			`paperclip_email_sends_open{outcome="queued"}`:               0,
			`paperclip_email_deliveries_waiting{state="retry"}`:          0,
			`paperclip_email_send_oldest_open_seconds{outcome="queued"}`: 0,
		}
		for name, want := range exactly {
			if v, ok := m[name]; !ok || v != want {
				t.Errorf("%s = %v (present %v), want %v", name, v, ok, want)
			}
		}

		e.Control(t, e.ep, "pause")
		testkit.Eventually(t, wait, "the gauges to follow the pause", func() bool {
			m := e.scrape()
			return m[`paperclip_email_inboxes{mode="websocket",status="paused"}`] == 1 && m[`paperclip_email_inboxes{mode="websocket",status="active"}`] == 0 &&
				m[`paperclip_email_sockets_connected`] == 0
		})
	})
}
