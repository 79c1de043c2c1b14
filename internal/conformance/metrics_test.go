package conformance_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/emulator"
	"github.com/paperclipai/paperclipai/internal/inbound/queue"
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
			`paperclip_email_sockets_held`:                               1,
			`paperclip_email_socket_fair_share`:                          1,
			`paperclip_email_replicas_live`:                              1,
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

		// More outcomes: bounced and rejected sends; a message while the
		// live connection is down (admitted by the catch-up); a message
		// the provider labels spam, named by a plain message.received
		// event (filtered), twice (the second a duplicate); a message
		// whose fetch is rate limited for an hour (waiting to retry).
		for _, to := range []string{"bounce@example.com", "reject@example.com"} {
			req := e.newEmail(to, "Receipt for "+to)
			e.Board.JSON("POST", e.sendPath(), req, 202)
			e.waitOutcome(req["idempotencyKey"].(string), "failed")
		}
		down := e.Em.AddFault(emulator.Fault{Match: emulator.FaultMatch{Operation: "websocket"}, Status: 503, Code: "service_unavailable"})
		e.Em.DropWebSockets()
		missed := e.deliver(emulator.DeliverRequest{Subject: "While down", Text: "caught up"})
		if err := e.Em.RemoveFault(down); err != nil {
			t.Fatal(err)
		}
		e.task("While down")
		if d, ok := e.deliveryOf(missed.MessageID); !ok || d.Source != "catchup" {
			t.Fatalf("the missed message's delivery: %+v %v", d, ok)
		}
		e.waitReceiving()
		spam := e.deliver(emulator.DeliverRequest{Subject: "Spam", Text: "buy now", Headers: map[string]string{"X-Spam-Flag": "YES"}})
		ep, err := e.Store.GetEndpoint(context.Background(), e.Store.DB, e.ep)
		if err != nil {
			t.Fatal(err)
		}
		frame, _ := json.Marshal(map[string]any{"type": "event", "event_type": "message.received", "event_id": "evt_" + spam.MessageID,
			"message": map[string]any{"inbox_id": e.addr, "message_id": spam.MessageID}})
		for i, want := range []bool{true, false} {
			if ok, err := e.Inbound.AdmitRaw(context.Background(), ep, frame, queue.SourceWebSocket); err != nil || ok != want {
				t.Fatalf("admission %d of the spam event: %v %v", i+1, ok, err)
			}
		}
		e.settled()
		// Receiving reads a new message through its thread's listing
		// (one provider read per thread and batch), so that read is the
		// one rate limited.
		e.Em.AddFault(emulator.Fault{Match: emulator.FaultMatch{Operation: "get_thread"}, Status: 429, Code: "rate_limit_exceeded",
			Headers: map[string]string{"Retry-After": "3600"}, Times: 1})
		later := e.deliver(emulator.DeliverRequest{Subject: "Fetch me later", Text: "rate limited"})
		testkit.Eventually(t, wait, "the rate-limited delivery to wait for its retry", func() bool {
			d, ok := e.deliveryOf(later.MessageID)
			return ok && d.State == domain.DeliveryRetry
		})
		// The catch-up's task woke the agent; its run finishes in its own
		// process, after the delivery settled, so wait for it to count.
		testkit.Eventually(t, wait, "the second run to finish", func() bool {
			return e.scrape()[`paperclip_heartbeat_runs_finished_total{status="succeeded"}`] >= 2
		})
		time.Sleep(10 * time.Millisecond)
		m = e.scrape()
		atLeast = map[string]float64{
			`paperclip_email_send_receipts_total{kind="message.sent"}`:                                                                   4,
			`paperclip_email_send_receipts_total{kind="message.bounced"}`:                                                                1,
			`paperclip_email_send_receipts_total{kind="message.rejected"}`:                                                               1,
			`paperclip_email_admission_seconds_count{source="catchup"}`:                                                                  1,
			`paperclip_email_deliveries_total{outcome="filtered"}`:                                                                       1,
			`paperclip_email_deliveries_total{outcome="duplicate"}`:                                                                      1,
			`paperclip_email_deliveries_total{outcome="retry"}`:                                                                          1,
			`paperclip_email_delivery_oldest_waiting_seconds{state="retry"}`:                                                             0.001,
			`paperclip_heartbeat_runs_started_total`:                                                                                     2,
			`paperclip_heartbeat_runs_finished_total{status="succeeded"}`:                                                                2,
			`paperclip_heartbeat_run_duration_seconds_count`:                                                                             2,
			`paperclip_http_requests_total{code="Accepted",method="POST",route="POST /api/companies/{companyId}/email/send",via="http"}`: 5,
			`paperclip_http_request_duration_seconds_count{route="POST /api/companies/{companyId}/email/send",via="http"}`:               5,
		}
		for name, min := range atLeast {
			if v, ok := m[name]; !ok || v < min {
				t.Errorf("%s = %v (present %v), want at least %v", name, v, ok, min)
			}
		}
		exactly = map[string]float64{
			`paperclip_email_deliveries_waiting{state="retry"}`:                   1,
			`paperclip_email_delivery_oldest_waiting_seconds{state="received"}`:   0,
			`paperclip_email_delivery_oldest_waiting_seconds{state="processing"}`: 0,
		}
		for name, want := range exactly {
			if v, ok := m[name]; !ok || v != want {
				t.Errorf("%s = %v (present %v), want %v", name, v, ok, want)
			}
		}
		e.checkDocumentedMetrics()

		e.Control(t, e.ep, "pause")
		testkit.Eventually(t, wait, "the gauges to follow the pause", func() bool {
			m := e.scrape()
			return m[`paperclip_email_inboxes{mode="websocket",status="paused"}`] == 1 && m[`paperclip_email_inboxes{mode="websocket",status="active"}`] == 0 &&
				m[`paperclip_email_sockets_connected`] == 0
		})

		// The database gauges unreadable (their table gone for a moment):
		// stats_up 0 and the database gauges left out, the process's own
		// metrics still served; back to 1 once the table is back.
		if _, err := e.DB.Exec(`ALTER TABLE email_sends RENAME TO email_sends_hidden`); err != nil {
			t.Fatal(err)
		}
		m = e.scrape()
		if _, err := e.DB.Exec(`ALTER TABLE email_sends_hidden RENAME TO email_sends`); err != nil {
			t.Fatal(err)
		}
		if v, ok := m[`paperclip_email_stats_up`]; !ok || v != 0 {
			t.Errorf("paperclip_email_stats_up = %v (present %v) with the gauges unreadable, want 0", v, ok)
		}
		for name := range m {
			if strings.HasPrefix(name, "paperclip_email_inboxes") || strings.HasPrefix(name, "paperclip_email_sends_open") ||
				strings.HasPrefix(name, "paperclip_email_deliveries_waiting") || strings.HasPrefix(name, "paperclip_email_delivery_oldest") {
				t.Errorf("database gauge %s served although it could not be read", name)
			}
		}
		if m[`paperclip_heartbeat_runs_started_total`] < 2 || m[`paperclip_email_sockets_connected`] != 0 {
			t.Errorf("the process metrics must still be served: %v", m[`paperclip_heartbeat_runs_started_total`])
		}
		if m = e.scrape(); m[`paperclip_email_stats_up`] != 1 {
			t.Errorf("paperclip_email_stats_up = %v after the table came back", m[`paperclip_email_stats_up`])
		}
	})
}

// checkDocumentedMetrics compares docs/operations.md with what /metrics
// serves: every metric its tables list is served, every paperclip_ metric
// served is listed, and every metric its alerts name exists.
func (e *env) checkDocumentedMetrics() {
	e.t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "operations.md"))
	if err != nil {
		e.t.Fatal(err)
	}
	listed, named := map[string]bool{}, map[string]bool{}
	row := regexp.MustCompile("(?m)^\\| `(paperclip_[a-z_]+)` \\|")
	for _, m := range row.FindAllStringSubmatch(string(doc), -1) {
		listed[m[1]] = true
	}
	for _, n := range regexp.MustCompile(`paperclip_[a-z_]+`).FindAllString(string(doc), -1) {
		for _, suffix := range []string{"_bucket", "_count", "_sum"} {
			n = strings.TrimSuffix(n, suffix)
		}
		named[n] = true
	}
	served := e.families()
	for n := range listed {
		if !served[n] {
			e.t.Errorf("docs/operations.md lists %s, which /metrics does not serve", n)
		}
	}
	for n := range named {
		if !served[n] {
			e.t.Errorf("docs/operations.md names %s, which /metrics does not serve", n)
		}
	}
	for n := range served {
		if strings.HasPrefix(n, "paperclip_") && !listed[n] {
			e.t.Errorf("/metrics serves %s, which docs/operations.md does not list", n)
		}
	}
	if len(listed) < 20 {
		e.t.Errorf("only %d metrics found in docs/operations.md's tables", len(listed))
	}
}

// families returns the metric families /metrics declares (# TYPE lines).
func (e *env) families() map[string]bool {
	e.t.Helper()
	resp, err := http.Get(e.URL() + "/metrics")
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]bool{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 4 && f[0] == "#" && f[1] == "TYPE" {
			out[f[2]] = true
		}
	}
	return out
}
