package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/agentmail"
	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/emulator"
	"github.com/paperclipai/paperclipai/internal/qualify"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// qualifyEnv is a server on a database, an emulator whose webhooks reach
// the server through a loopback TLS front (its public HTTPS URL), and an
// organization key that is a canary: it must never show in any output.
// The server reaches the provider's REST API through a recorder that
// keeps every secret the provider issues to it (the runtime keys and the
// webhook signing secrets of setup and reconnects): canaries too.
type qualifyEnv struct {
	inst    *testkit.Instance
	em      *emulator.Server
	key     string
	keyFile string
	issued  *issuedSecrets
}

// issuedSecrets are the API keys and webhook secrets the provider handed
// out, taken from its creation responses.
type issuedSecrets struct {
	mu               sync.Mutex
	keys, hookSecret []string
}

func (s *issuedSecrets) record(res *http.Response) error {
	if res.Request.Method != http.MethodPost {
		return nil
	}
	body, err := io.ReadAll(res.Body)
	res.Body.Close()
	res.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil {
		return err
	}
	var v struct {
		APIKey string `json:"api_key"`
		Secret string `json:"secret"`
	}
	if json.Unmarshal(body, &v) == nil {
		s.mu.Lock()
		defer s.mu.Unlock()
		if v.APIKey != "" {
			s.keys = append(s.keys, v.APIKey)
		}
		if v.Secret != "" {
			s.hookSecret = append(s.hookSecret, v.Secret)
		}
	}
	return nil
}

func (s *issuedSecrets) all() (keys, secrets []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.keys...), append([]string(nil), s.hookSecret...)
}

func newQualifyEnv(t *testing.T, databaseURL string) *qualifyEnv {
	t.Helper()
	t.Setenv("PAPERCLIP_API_KEY", "")
	t.Setenv("PAPERCLIP_COMPANY_ID", "")
	var backend atomic.Pointer[url.URL]
	front := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		httputil.NewSingleHostReverseProxy(backend.Load()).ServeHTTP(w, r)
	}))
	front.StartTLS()
	t.Cleanup(front.Close)
	key := "am_canary_" + strings.ReplaceAll(testkit.NewUUID(), "-", "")
	em, err := emulator.Start(context.Background(), emulator.Options{DeliveryDelay: -1, APIKeys: []string{key},
		WebhookTransport: front.Client().Transport})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { em.Close() })
	cfg := testkit.EmailConfig(testkit.Config(t, databaseURL), em)
	cfg.PublicURL = front.URL
	issued := &issuedSecrets{}
	emURL, _ := url.Parse(em.URL())
	rec := httputil.NewSingleHostReverseProxy(emURL)
	rec.ModifyResponse = issued.record
	recorder := httptest.NewServer(rec)
	t.Cleanup(recorder.Close)
	cfg.AgentMailAPIURL = recorder.URL + "/v0"
	inst := testkit.Start(t, cfg)
	u, _ := url.Parse(inst.URL())
	backend.Store(u)
	testkit.NewClient(t, inst.URL()).JSON("PATCH", "/api/instance/settings",
		map[string]any{"experimental": map[string]any{"enableChatConnectors": true}}, 200)
	keyFile := filepath.Join(t.TempDir(), "agentmail.key")
	if err := os.WriteFile(keyFile, []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return &qualifyEnv{inst: inst, em: em, key: key, keyFile: keyFile, issued: issued}
}

// recipientInbox creates an inbox of the key's organization to act as the
// approved test recipient (the provider path: the key sends from it).
func (e *qualifyEnv) recipientInbox(t *testing.T, username string) string {
	t.Helper()
	c, err := agentmail.New(agentmail.Options{BaseURL: e.em.APIURL(), APIKey: e.key})
	if err != nil {
		t.Fatal(err)
	}
	in, err := c.CreateInbox(context.Background(), agentmail.CreateInboxRequest{Username: username})
	if err != nil {
		t.Fatal(err)
	}
	return in.InboxID
}

// run runs the command in-process with the key file and returns its exit
// code and stderr.
func (e *qualifyEnv) run(t *testing.T, stdout *testkit.SyncBuffer, args ...string) (int, string) {
	t.Helper()
	return e.runWith(t, strings.NewReader(""), stdout, append([]string{"--api-key-file", e.keyFile}, args...)...)
}

// runWith runs the command in-process with stdin and args (no key file
// unless args name one).
func (e *qualifyEnv) runWith(t *testing.T, stdin io.Reader, stdout *testkit.SyncBuffer, args ...string) (int, string) {
	t.Helper()
	var stderr bytes.Buffer
	base := []string{"email", "qualify", "--server", e.inst.URL()}
	code := Main(context.Background(), append(base, args...), stdin, stdout, &stderr)
	return code, stderr.String()
}

// noCanary fails when the key, or a runtime key or webhook secret the
// provider issued to the server, shows in any output of the run or the
// server's log.
func (e *qualifyEnv) noCanary(t *testing.T, outputs ...string) {
	t.Helper()
	keys, secrets := e.issued.all()
	for i, out := range append(outputs, e.inst.Logs.String()) {
		if strings.Contains(out, e.key) || strings.Contains(out, "am_canary_") {
			t.Fatalf("output %d carries the AgentMail key", i)
		}
		for _, k := range keys {
			if strings.Contains(out, k) {
				t.Fatalf("output %d carries a runtime key the provider issued", i)
			}
		}
		for _, s := range secrets {
			// The secret, or its key material without the whsec_ prefix.
			if strings.Contains(out, s) || strings.Contains(out, strings.TrimPrefix(s, "whsec_")) {
				t.Fatalf("output %d carries a webhook signing secret", i)
			}
		}
	}
}

func decodeReport(t *testing.T, raw string) *qualify.Report {
	t.Helper()
	var rep qualify.Report
	if err := json.Unmarshal([]byte(raw), &rep); err != nil {
		t.Fatalf("decode the JSON report: %v\n%s", err, raw)
	}
	return &rep
}

func stepsByID(rep *qualify.Report) map[string]*qualify.Step {
	out := map[string]*qualify.Step{}
	for _, s := range rep.Steps {
		out[s.ID] = s
	}
	return out
}

// The "done" line: `paperclipai email qualify --emulator` passes in
// both modes and writes a report with every step, the provider ids and the
// stage timings, and the key appears nowhere.
func TestQualifyAgainstEmulator(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, databaseURL string) {
		e := newQualifyEnv(t, databaseURL)
		recipient := e.recipientInbox(t, "approved-tester")
		report := filepath.Join(t.TempDir(), "qualification.md")
		stdout := &testkit.SyncBuffer{}
		code, stderr := e.run(t, stdout, "--recipient", recipient, "--modes", "websocket,webhook", "--emulator", e.em.URL(),
			"--report", report, "--json", "--timeout", "60s")
		if code != 0 {
			t.Fatalf("exit %d\nstderr:\n%s\nstdout:\n%s\nlogs:\n%s", code, stderr, stdout.String(), e.inst.Logs.String())
		}
		rep := decodeReport(t, stdout.String())
		if !rep.Passed || rep.Provider != "emulator" || rep.InboundPath != "provider" || !rep.InboxCreated || rep.KeyScope != "organization" {
			t.Fatalf("report header: %+v", rep)
		}
		for _, s := range rep.Steps {
			if s.Status != qualify.StatusPassed || s.DurationMs == nil {
				t.Errorf("step %s: %s %s", s.ID, s.Status, s.Detail)
			}
		}
		// Three messages per mode (receive, reconnect, interrupt), each
		// fully timed; the live ones came over the mode's transport and
		// the interrupted ones through the catch-up or a redelivery.
		if len(rep.Inbound) != 6 {
			t.Fatalf("inbound records: %d", len(rep.Inbound))
		}
		for _, m := range rep.Inbound {
			if m.ProviderMessageID == "" || m.ProviderThreadID == "" || m.TaskID == "" || m.RunID == "" ||
				m.TransitMs == nil || m.AdmissionToWakeMs == nil || m.WakeToRunStartMs == nil || m.ReceivedAt == nil {
				t.Errorf("inbound %s/%s incomplete: %+v", m.Mode, m.Step, m)
			}
			want := m.Mode
			if m.Step == "interrupt" && m.Mode == qualify.ModeWebSocket {
				want = "catchup"
			}
			if m.Step == "interrupt" && m.Mode == qualify.ModeWebhook && m.Source == "catchup" {
				want = "catchup"
			}
			if m.Source != want {
				t.Errorf("inbound %s/%s admitted by %s, want %s", m.Mode, m.Step, m.Source, want)
			}
		}
		if len(rep.Replies) != 2 {
			t.Fatalf("replies: %d", len(rep.Replies))
		}
		for _, p := range rep.Replies {
			if p.Outcome != "delivered" || p.ProviderMessageID == "" || p.ProviderThreadID == "" || p.InReplyTo == "" ||
				p.AcceptedToSentMs == nil || p.SentToDeliveredMs == nil {
				t.Errorf("reply %s incomplete: %+v", p.Mode, p)
			}
		}
		md, err := os.ReadFile(report)
		if err != nil {
			t.Fatal(err)
		}
		if fi, err := os.Stat(report); err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("the report is not private: %v %v", fi.Mode(), err)
		}
		for _, want := range []string{"# Email live qualification: PASS", rep.Inbound[0].ProviderMessageID, rep.Replies[0].ProviderMessageID,
			"Admission → wake", "Sent → delivered"} {
			if !strings.Contains(string(md), want) {
				t.Errorf("the Markdown report lacks %q", want)
			}
		}
		if !strings.Contains(stderr, "Qualification PASSED") || !strings.Contains(stderr, "pass  websocket: mail received") {
			t.Errorf("progress and table on stderr:\n%s", stderr)
		}
		// Setup and each reconnect issued a runtime key, and the webhook
		// mode a signing secret: the canary check below covers them.
		if keys, secrets := e.issued.all(); len(keys) < 2 || len(secrets) < 1 {
			t.Fatalf("issued secrets: %d runtime keys, %d webhook secrets", len(keys), len(secrets))
		}
		e.noCanary(t, stdout.String(), stderr, string(md))
		// Cleanup left the provider inbox but no registration of the run.
		c, _ := agentmail.New(agentmail.Options{BaseURL: e.em.APIURL(), APIKey: e.key})
		whs, err := c.ListInboxWebhooks(context.Background(), rep.Inbox, agentmail.ListParams{})
		if err != nil || len(whs.Webhooks) != 0 {
			t.Fatalf("webhooks left: %+v %v", whs, err)
		}
	})
}

// With emulator faults (WebSocket handshakes refused, replies answered
// 503) the failed steps say what failed, the rest still runs, cleanup
// still happens, and the exit code is non-zero.
func TestQualifyReportsEmulatorFaults(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, databaseURL string) {
		e := newQualifyEnv(t, databaseURL)
		e.em.AddFault(emulator.Fault{Match: emulator.FaultMatch{Operation: "websocket"}, Status: 503, Code: "service_unavailable"})
		e.em.AddFault(emulator.Fault{Match: emulator.FaultMatch{Operation: "reply_message"}, Status: 503, Code: "service_unavailable"})
		report := filepath.Join(t.TempDir(), "qualification.md")
		stdout := &testkit.SyncBuffer{}
		// The key comes from standard input (--api-key-file -).
		code, stderr := e.runWith(t, strings.NewReader(e.key+"\n"), stdout, "--api-key-file", "-", "--recipient", "qa@example.net",
			"--modes", "websocket,webhook", "--emulator", e.em.URL(), "--report", report, "--timeout", "6s")
		if code == 0 {
			t.Fatalf("a faulty run exited 0:\n%s", stdout.String())
		}
		out := stdout.String()
		for _, want := range []string{
			"FAIL    websocket: inbox connected and receiving", "a subscribed live connection",
			"FAIL    webhook: explicit reply accepted, sent, delivered", "outcome uncertain (last error: AgentMail request failed (503)",
			"SKIP    websocket: mail received", "SKIP    webhook: reply threaded by the provider",
			"PASS    webhook: mail received, one task, one wake", "PASS    Cleanup", "Qualification FAILED",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("output lacks %q:\n%s", want, out)
			}
		}
		md, err := os.ReadFile(report)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(md), "# Email live qualification: FAIL") || !regexp.MustCompile(`\| webhook: explicit reply accepted, sent, delivered \| FAILED \|`).Match(md) {
			t.Errorf("Markdown report:\n%s", md)
		}
		e.noCanary(t, out, stderr, string(md))
	})
}

// Against a provider that is not the emulator (here the emulator's REST
// API without --emulator, as a real account would be), with an external
// recipient: the operator is asked to send each test message, receiving
// is interrupted by pausing, and reconnecting goes through the API.
func TestQualifyManualRecipient(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, databaseURL string) {
		e := newQualifyEnv(t, databaseURL)
		stdout := &testkit.SyncBuffer{}
		done := make(chan struct{})
		go func() {
			// Play the operator: send what the command asks for.
			defer close(done)
			re := regexp.MustCompile(`note  Send an email now from (\S+) to (\S+) with the subject "([^"]+)"`)
			sent := map[string]bool{}
			for ctxDone := time.After(3 * time.Minute); ; {
				for _, m := range re.FindAllStringSubmatch(stdout.String(), -1) {
					if !sent[m[3]] {
						sent[m[3]] = true
						if _, err := e.em.Deliver(m[2], emulator.DeliverRequest{From: m[1], Subject: m[3], Text: "by hand"}); err != nil {
							t.Errorf("deliver: %v", err)
						}
					}
					if len(sent) == 3 {
						return
					}
				}
				select {
				case <-ctxDone:
					return
				case <-time.After(50 * time.Millisecond):
				}
			}
		}()
		code, stderr := e.run(t, stdout, "--recipient", "operator@example.net", "--agentmail-url", e.em.APIURL(),
			"--timeout", "60s", "--settle", "500ms")
		<-done
		if code != 0 {
			t.Fatalf("exit %d\nstderr:\n%s\nstdout:\n%s", code, stderr, stdout.String())
		}
		out := stdout.String()
		for _, want := range []string{"pass  websocket: disconnect, reconnect, receive again (", "reconnected through the API",
			"pass  websocket: receiving interrupted, mail caught up (", "paused, no task", "Qualification PASSED"} {
			if !strings.Contains(out, want) {
				t.Errorf("output lacks %q:\n%s", want, out)
			}
		}
		e.noCanary(t, out, stderr)
	})
}

// Without a key file and without a terminal the command stops before
// touching the server, saying how to give the key; an empty or
// multi-line key from standard input is refused the same way.
func TestQualifyKeyInput(t *testing.T) {
	devNull, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer devNull.Close()
	for _, tc := range []struct {
		name  string
		stdin io.Reader
		args  []string
		want  string
	}{
		{"no key, reader", strings.NewReader("am_not_read\n"), nil, "no AgentMail key: give --api-key-file FILE (or - for stdin), or run on a terminal to be asked"},
		{"no key, not a terminal", devNull, nil, "no AgentMail key: give --api-key-file FILE (or - for stdin), or run on a terminal to be asked"},
		{"empty stdin", strings.NewReader("\n"), []string{"--api-key-file", "-"}, "the AgentMail key is empty or spans several lines"},
		{"two lines", strings.NewReader("am_one\nam_two\n"), []string{"--api-key-file", "-"}, "the AgentMail key is empty or spans several lines"},
		{"missing file", strings.NewReader(""), []string{"--api-key-file", filepath.Join(t.TempDir(), "nope")}, "read the AgentMail key:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			// The server address is never dialled: the key is read first.
			args := append([]string{"email", "qualify", "--server", "http://127.0.0.1:1", "--recipient", "qa@example.net"}, tc.args...)
			code := Main(context.Background(), args, tc.stdin, &stdout, &stderr)
			if code == 0 || !strings.Contains(stderr.String(), tc.want) {
				t.Fatalf("exit %d, stderr %q, want %q", code, stderr.String(), tc.want)
			}
			if out := stderr.String() + stdout.String(); strings.Contains(out, "am_not_read") || strings.Contains(out, "am_one") {
				t.Fatalf("the key input was echoed: %q", stderr.String())
			}
		})
	}
}
