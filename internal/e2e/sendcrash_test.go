package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/emulator"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// Shape of the crash test: sends spread over parent tasks, and how many
// clients accept them concurrently.
const (
	crashSends     = 200
	crashParents   = 20
	crashAcceptors = 8
	crashRecipient = "client@example.com"
)

// emulatorProc is a standalone `paperclipai emulator` process.
type emulatorProc struct {
	url    string // http://127.0.0.1:PORT
	apiKey string
	ctl    *testkit.Client
}

// startEmulatorProc runs the AgentMail emulator as its own process (no
// SMTP, one pre-created organization key) on port 0 and waits until it
// says where it listens and answers there.
func startEmulatorProc(t *testing.T) *emulatorProc {
	t.Helper()
	key := "am_crash_" + strings.ReplaceAll(testkit.NewUUID(), "-", "")
	c := startEmulatorChild(t, "--listen", "127.0.0.1:0", "--smtp", "", "--api-key", key, "--delivery-delay", "50ms")
	url := c.waitStdout(t, 30*time.Second, "the emulator to listen", emulatorControlRE)[0]
	em := &emulatorProc{url: url, apiKey: key, ctl: testkit.NewClient(t, url)}
	c.eventually(t, 30*time.Second, "emulator health at "+em.url, func() bool {
		resp, err := http.Get(em.url + "/_emulator/health")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	return em
}

// emulatorControlRE matches the line `paperclipai emulator` prints with
// its bound address.
var emulatorControlRE = regexp.MustCompile(`Control:\s+(http://\S+)/_emulator/`)

// startEmulatorChild starts `paperclipai emulator` with args; when t ends
// it gets SIGTERM, and SIGKILL 10 s later.
func startEmulatorChild(t *testing.T, args ...string) *child {
	t.Helper()
	c := startChild(t, exec.Command(testkit.Binary(t), append([]string{"emulator"}, args...)...))
	// Registered after startChild's kill, so it runs first.
	t.Cleanup(func() {
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
		_, _ = c.waitExit(10 * time.Second)
	})
	return c
}

// env points a server process at the emulator.
func (em *emulatorProc) env() []string {
	return []string{"PAPERCLIP_AGENTMAIL_API_URL=" + em.url + "/v0", "PAPERCLIP_AGENTMAIL_WS_URL=ws" + strings.TrimPrefix(em.url, "http") + "/v0"}
}

// outbox returns the messages sent to recipient.
func (em *emulatorProc) outbox(t *testing.T, recipient string) []emulator.OutboxMessage {
	t.Helper()
	var out struct {
		Messages []emulator.OutboxMessage `json:"messages"`
	}
	em.decode(t, "/_emulator/outbox?to="+recipient, &out)
	return out.Messages
}

// requests returns the provider requests whose path starts with prefix.
func (em *emulatorProc) requests(t *testing.T, prefix string) []emulator.RecordedRequest {
	t.Helper()
	var out struct {
		Requests []emulator.RecordedRequest `json:"requests"`
	}
	em.decode(t, "/_emulator/requests?path_prefix="+prefix, &out)
	return out.Requests
}

func (em *emulatorProc) decode(t *testing.T, path string, v any) {
	t.Helper()
	st, body := em.ctl.Do("GET", path, nil)
	if st != 200 {
		t.Fatalf("GET %s: %d %s", path, st, body)
	}
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
}

// TestSendsSurviveServerCrashes is the outbound crash test (issue 6): 200
// sends are accepted, the server is SIGKILLed twice while sends execute and
// restarted on the same home and database, and in the end every
// publication is sent or delivered while the provider holds exactly one
// email per publication (one per idempotency key).
//
// The first kill is deterministic: the emulator holds back its response to
// the first sends (it has accepted the emails, the server has not heard
// back), so the kill strands attempts that reached the provider but were
// never recorded. The second kill lands in the middle of the free-running
// stream. Kill points are logged.
func TestSendsSurviveServerCrashes(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, dialect db.Dialect, url string) {
		t0 := time.Now()
		elapsed := func() time.Duration { return time.Since(t0).Round(time.Millisecond) }
		em := startEmulatorProc(t)
		home := t.TempDir()
		// Webhook mode with an unreachable public URL: the provider pushes
		// no message.sent event back, so a stranded attempt is settled by
		// the worker retrying it with the same key (or by the catch-up's
		// reconciliation), not hidden by an event racing the kill.
		env := append(em.env(), "PAPERCLIP_PUBLIC_URL=https://paperclip.invalid", "PAPERCLIP_EMAIL_LEASE_TTL=3s",
			"PAPERCLIP_AGENTMAIL_TIMEOUT=20s")
		p := start(t, home, url, env...)
		c := testkit.NewClient(t, p.url)
		c.JSON("PATCH", "/api/instance/settings", map[string]any{"experimental": map[string]any{"enableChatConnectors": true}}, 200)
		cid := testkit.ID(c.JSON("POST", "/api/companies", map[string]any{"name": "Crash Sends"}, 201))
		aid := testkit.ID(c.JSON("POST", "/api/companies/"+cid+"/agents", map[string]any{"name": "Mail Agent", "adapterType": "process",
			"adapterConfig": map[string]any{"command": "/bin/true"}}, 201))
		ep := c.JSON("POST", "/api/companies/"+cid+"/email/inboxes", map[string]any{"assignedAgentId": aid, "apiKey": em.apiKey,
			"username": "sender", "receiveMode": "webhook", "idempotencyKey": testkit.NewUUID()}, 201)
		endpoint := testkit.ID(ep)
		// 200 emails to one recipient exceed the default per-recipient cap.
		c.JSON("POST", "/api/companies/"+cid+"/action-policies", map[string]any{"action": "email.recipient_sends",
			"effect": "allow", "rateLimitCount": 10_000, "rateLimitWindowSeconds": 3600}, 201)
		parents := make([]string, crashParents)
		for i := range parents {
			parents[i] = testkit.ID(c.JSON("POST", "/api/companies/"+cid+"/issues", map[string]any{
				"title": fmt.Sprintf("Outreach %d", i), "assigneeAgentId": aid}, 201))
		}
		database := openDB(t, dialect, url, home)

		// The provider accepts the first sends (at most four: the worker's
		// concurrency) but answers none of them before the kill; the fault
		// is cleared after the kill so that it cannot hold later sends.
		em.ctl.JSON("POST", "/_emulator/faults", map[string]any{"match": map[string]any{"operation": "send_message"},
			"delay_ms": 120_000, "times": 4}, 200)

		keys := make([]string, crashSends)
		for i := range keys {
			keys[i] = testkit.NewUUID()
		}
		acceptAll(t, p.url+"/api/companies/"+cid+"/email/send", endpoint, parents, keys)

		// Kill 1: every send is accepted and at least one attempt is stuck
		// at the provider (which already has the email).
		testkit.Eventually(t, 30*time.Second, "a send held at the provider", func() bool {
			return len(em.outbox(t, crashRecipient)) >= 1
		})
		_ = p.stop(t, syscall.SIGKILL)
		logKill(t, 1, elapsed(), em, database)
		expireDeadLeases(t, dialect, database)

		// Kill 2: in the middle of the free-running stream after a restart.
		// Each response is a little slower than the send itself, widening
		// the window in which the provider has an email the server has not
		// recorded.
		clearFaults(t, em)
		em.ctl.JSON("POST", "/_emulator/faults", map[string]any{"match": map[string]any{"operation": "send_message"}, "delay_ms": 10}, 200)
		p = start(t, home, url, env...)
		t.Logf("%v: restarted", elapsed())
		testkit.Eventually(t, 60*time.Second, "half of the sends at the provider", func() bool {
			return len(em.outbox(t, crashRecipient)) >= crashSends/2
		})
		_ = p.stop(t, syscall.SIGKILL)
		logKill(t, 2, elapsed(), em, database)
		expireDeadLeases(t, dialect, database)
		clearFaults(t, em)

		p = start(t, home, url, env...)
		t.Logf("%v: restarted", elapsed())
		c = testkit.NewClient(t, p.url)
		testkit.Eventually(t, 60*time.Second, "every publication sent or delivered", func() bool {
			counts := outcomeCounts(t, database)
			return counts["sent"]+counts["delivered"] == crashSends
		})
		t.Logf("%v: settled: %s", elapsed(), describeCounts(outcomeStateCounts(t, database)))

		// Through the API, too: every accepted key is a settled publication.
		for _, k := range keys {
			d := c.JSON("GET", "/api/companies/"+cid+"/email/deliveries/"+k, nil, 200)
			if (d["outcome"] != "sent" && d["outcome"] != "delivered") || d["providerMessageId"] == nil || d["error"] != nil {
				t.Fatalf("delivery %s: %v", k, d)
			}
		}
		// Exactly one email per publication at the provider.
		out := em.outbox(t, crashRecipient)
		perKey := map[string]int{}
		for _, m := range out {
			perKey[m.IdempotencyKey]++
			if m.Headers["X-Paperclip-Publication-Id"] != m.IdempotencyKey {
				t.Fatalf("message %s: publication header %q, idempotency key %q", m.MessageID,
					m.Headers["X-Paperclip-Publication-Id"], m.IdempotencyKey)
			}
		}
		for k, n := range perKey {
			if n != 1 {
				t.Errorf("idempotency key %s: %d emails", k, n)
			}
		}
		if len(out) != crashSends || len(perKey) != crashSends {
			t.Fatalf("emulator outbox holds %d messages with %d distinct idempotency keys, want %d", len(out), len(perKey), crashSends)
		}
		for _, k := range keys {
			if perKey[k] != 1 {
				t.Fatalf("accepted send %s has no email at the provider", k)
			}
		}
		// Attempts repeated after a crash reused their key; log how many.
		attempts := map[string]int{}
		for _, r := range em.requests(t, "/v0/inboxes/") {
			if r.Method == "POST" && strings.HasSuffix(r.Path, "/messages/send") {
				if r.IdempotencyKey == nil || !slices.Contains(keys, *r.IdempotencyKey) {
					t.Fatalf("provider send without a known idempotency key: %+v", r)
				}
				attempts[*r.IdempotencyKey]++
			}
		}
		repeated, total := 0, 0
		for _, n := range attempts {
			total += n
			if n > 1 {
				repeated++
			}
		}
		t.Logf("provider send requests: %d for %d publications; %d publications attempted more than once (same key)", total, len(attempts), repeated)
	})
}

// clearFaults removes every injected provider fault.
func clearFaults(t *testing.T, em *emulatorProc) {
	t.Helper()
	if st, body := em.ctl.Do("DELETE", "/_emulator/faults", nil); st/100 != 2 {
		t.Fatalf("clear faults: %d %s", st, body)
	}
}

// acceptAll posts one send per key, spread over the parent tasks, from
// crashAcceptors concurrent clients, and requires 202 for each.
func acceptAll(t *testing.T, sendURL, endpoint string, parents, keys []string) {
	t.Helper()
	work := make(chan int, len(keys))
	for i := range keys {
		work <- i
	}
	close(work)
	client := &http.Client{Timeout: 30 * time.Second}
	defer client.CloseIdleConnections()
	var wg sync.WaitGroup
	errs := make(chan error, crashAcceptors)
	began := time.Now()
	for range crashAcceptors {
		wg.Go(func() {
			for i := range work {
				body, _ := json.Marshal(map[string]any{"endpointId": endpoint, "parentIssueId": parents[i%len(parents)],
					"to": []string{crashRecipient}, "subject": fmt.Sprintf("Crash test %d", i),
					"text": fmt.Sprintf("Send %d of the crash test.", i), "idempotencyKey": keys[i]})
				resp, err := client.Post(sendURL, "application/json", bytes.NewReader(body))
				if err != nil {
					errs <- err
					return
				}
				out, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusAccepted {
					errs <- fmt.Errorf("send %d: status %d: %s", i, resp.StatusCode, out)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	t.Logf("accepted %d sends in %v", len(keys), time.Since(began).Round(time.Millisecond))
}

// openDB opens the server's database for inspection (SQLite: the file in
// home, read alongside the running process thanks to WAL).
func openDB(t *testing.T, dialect db.Dialect, url, home string) *db.DB {
	t.Helper()
	path := ""
	if dialect == db.SQLite {
		path = filepath.Join(home, "instance", "db", "paperclip.db")
	}
	d, err := db.Open(context.Background(), url, path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// outcomeStateCounts counts publications by "outcome/state".
func outcomeStateCounts(t *testing.T, d *db.DB) map[string]int {
	t.Helper()
	rows, err := d.QueryContext(context.Background(), `SELECT s.outcome, p.state, COUNT(*) FROM email_publications p
		JOIN email_sends s ON s.publication_id = p.id GROUP BY s.outcome, p.state`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var outcome, state string
		var n int
		if err := rows.Scan(&outcome, &state, &n); err != nil {
			t.Fatal(err)
		}
		out[outcome+"/"+state] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// outcomeCounts counts publications by outcome.
func outcomeCounts(t *testing.T, d *db.DB) map[string]int {
	t.Helper()
	out := map[string]int{}
	for k, n := range outcomeStateCounts(t, d) {
		out[strings.SplitN(k, "/", 2)[0]] += n
	}
	return out
}

func describeCounts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", k, m[k])
	}
	return strings.Join(parts, " ")
}

// logKill records a kill point: the publications by outcome/state, what
// the provider holds, and the in-doubt sends (an attempt started and not
// recorded) whose email the provider already has.
func logKill(t *testing.T, n int, at time.Duration, em *emulatorProc, d *db.DB) {
	t.Helper()
	atProvider := map[string]bool{}
	for _, m := range em.outbox(t, crashRecipient) {
		atProvider[m.IdempotencyKey] = true
	}
	rows, err := d.QueryContext(context.Background(), `SELECT p.id FROM email_publications p
		JOIN email_sends s ON s.publication_id = p.id WHERE p.state = 'streaming' AND s.outcome IN ('queued', 'uncertain')`)
	if err != nil {
		t.Fatal(err)
	}
	inDoubt, inDoubtSent := 0, 0
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		inDoubt++
		if atProvider[id] {
			inDoubtSent++
		}
	}
	rows.Close()
	t.Logf("%v: kill %d (SIGKILL): provider outbox %d; publications %s; in-doubt attempts %d, of which %d already at the provider",
		at, n, len(atProvider), describeCounts(outcomeStateCounts(t, d)), inDoubt, inDoubtSent)
}

// expireDeadLeases stands in for the lease TTL running out after a crash.
// On SQLite the restarted server clears a dead predecessor's leases itself
// (it holds the home lock). On PostgreSQL another replica could be alive,
// so the killed process's per-thread send leases block their conversations
// until they expire (90 s); the test expires them instead of waiting. No
// server process runs while this executes.
func expireDeadLeases(t *testing.T, dialect db.Dialect, d *db.DB) {
	t.Helper()
	if dialect != db.Postgres {
		return
	}
	res, err := d.ExecContext(context.Background(), `UPDATE email_leases SET expires_at = $1 WHERE lease_key LIKE 'email-thread:%' AND expires_at > $1`,
		time.Now().UTC().Add(-time.Second))
	if err != nil {
		t.Fatal(err)
	}
	n, _ := res.RowsAffected()
	t.Logf("expired %d thread leases of the killed process", n)
}
