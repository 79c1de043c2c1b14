package e2e_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/smtp"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// demoProc is a `paperclipai run --demo` process and the real addresses
// it printed: its server (url), emulator (em) and SMTP listener (smtp).
type demoProc struct {
	*child
	url, em, smtp string
}

// Lines of the demo's banner (demo.Instructions) that carry its addresses.
var (
	demoEmulatorRE = regexp.MustCompile(`AgentMail emulator: (http://\S+) `)
	demoSMTPRE     = regexp.MustCompile(`any SMTP client to (\S+) `)
	demoReadyRE    = regexp.MustCompile(`Give an agent an email address`)
)

func startDemo(t *testing.T, home, dbURL string) *demoProc {
	t.Helper()
	return startDemoWith(t, home, dbURL, nil, os.Environ())
}

// startDemoWith starts the demo with extra arguments and the given
// environment, every listener on port 0, and waits for its banner, from
// which it learns the addresses. Why port 0 and not free ports picked
// beforehand: a port found free and closed again can be taken (by any
// process's listener or outgoing connection) before the child binds it,
// and the child then exits with "address already in use".
func startDemoWith(t *testing.T, home, dbURL string, args, env []string) *demoProc {
	t.Helper()
	cmd := exec.Command(testkit.Binary(t), append([]string{"run", "--demo", "--home", home, "--listen", "127.0.0.1:0",
		"--demo-emulator-listen", "127.0.0.1:0", "--demo-smtp", "127.0.0.1:0"}, args...)...)
	cmd.Env = append(env, "PAPERCLIP_DATABASE_URL="+dbURL)
	began := time.Now()
	p := &demoProc{child: startChild(t, cmd)}
	// The banner comes after the seeding, in one write; its last line is
	// waited for so that the whole banner is there.
	got := p.waitStdout(t, 60*time.Second, "the demo to print its instructions",
		listeningRE, demoEmulatorRE, demoSMTPRE, demoReadyRE)
	p.url, p.em, p.smtp = got[0], got[1], got[2]
	// A figure, not an assertion: how close a loaded machine comes to the
	// limit above.
	t.Logf("the demo printed its banner %v after exec", time.Since(began).Round(time.Millisecond))
	return p
}

func (p *demoProc) stop(t *testing.T) {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	if ok, _ := p.waitExit(60 * time.Second); !ok {
		p.timedOut(t, 60*time.Second, "the demo to stop after SIGTERM")
	}
}

func (p *demoProc) outbox(t *testing.T, to string) []map[string]any {
	t.Helper()
	resp, err := http.Get(p.em + "/_emulator/outbox?to=" + to)
	if err != nil {
		if p.child != nil {
			t.Fatalf("outbox: %v\n%s", err, p.report())
		}
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Messages []map[string]any `json:"messages"`
	}
	body, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(body, &out); err != nil {
		t.Fatalf("outbox %s: %v", body, err)
	}
	return out.Messages
}

// The demo (README.md, "Quickstart"): a fresh home, an SMTP email to
// assistant@agentmail.to, a task, a run of the example agent, a reply with
// the right In-Reply-To, delivered; a re-run on the same home reuses the
// seeded data and keeps answering.
func TestDemoAnswersEmailEndToEnd(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		home := t.TempDir()
		p := startDemo(t, home, url)
		if out := p.stdout.String(); !strings.Contains(out, "/apps/agentmail/connect") ||
			!strings.Contains(out, "Paste the emulator's AgentMail API key when asked: am_demo_") {
			t.Fatalf("the demo does not say how to connect AgentMail in the browser:\n%s", out)
		}
		msgID := fmt.Sprintf("<demo-%d@example.com>", time.Now().UnixNano())
		raw := "From: Alice <alice@example.com>\r\nTo: assistant@agentmail.to\r\nSubject: Where is my order?\r\n" +
			"Message-ID: " + msgID + "\r\nDate: " + time.Now().UTC().Format(time.RFC1123Z) + "\r\n\r\nHi, order 42 has not arrived.\r\n"
		if err := smtp.SendMail(p.smtp, nil, "alice@example.com", []string{"assistant@agentmail.to"}, []byte(raw)); err != nil {
			t.Fatalf("smtp: %v\n%s", err, p.report())
		}
		var replies []map[string]any
		p.eventually(t, 90*time.Second, "the agent's reply", func() bool {
			replies = p.outbox(t, "alice@example.com")
			return len(replies) == 1
		})
		if replies[0]["in_reply_to"] != msgID {
			t.Fatalf("reply threading: in_reply_to %v, want %s", replies[0]["in_reply_to"], msgID)
		}
		c := testkit.NewClient(t, p.url)
		company := testkit.ID(c.List("/api/companies")[0])
		pub := replies[0]["idempotency_key"].(string)
		p.eventually(t, 30*time.Second, "delivery receipt", func() bool {
			return c.JSON("GET", "/api/companies/"+company+"/email/deliveries/"+pub, nil, 200)["outcome"] == "delivered"
		})
		// The receipt can arrive while the run is still finishing (the agent
		// sent the reply, then completes the task and exits): wait for the
		// run to end, then judge how it ended.
		var runs []map[string]any
		p.eventually(t, 60*time.Second, "the run to finish", func() bool {
			runs = c.List("/api/companies/" + company + "/heartbeat-runs")
			return len(runs) == 1 && runs[0]["finishedAt"] != nil
		})
		tasks := c.List("/api/companies/" + company + "/issues?originKind=chat_channel")
		if len(tasks) != 1 || runs[0]["status"] != "succeeded" {
			t.Fatalf("tasks %d, runs %v", len(tasks), runs)
		}
		// The answered task is done, not left to do.
		task := testkit.ID(tasks[0])
		if st := c.JSON("GET", "/api/issues/"+task, nil, 200)["status"]; st != "done" {
			t.Fatalf("answered task is %v, want done", st)
		}
		// The banner's API hint names this server, which is not on the
		// default address.
		if !strings.Contains(p.stdout.String(), "PAPERCLIP_API_URL="+p.url+"/api paperclipai api GET /companies/"+company+"/issues") {
			t.Fatalf("banner's api hint ignores --listen:\n%s", p.stdout.String())
		}
		// The banner says how to point the CLI at this demo: with that
		// environment, `paperclipai email status` reaches it (not 3100).
		m := regexp.MustCompile(`export (PAPERCLIP_API_URL=\S+) (PAPERCLIP_COMPANY_ID=\S+)`).FindStringSubmatch(p.stdout.String())
		if m == nil {
			t.Fatalf("the banner does not say how to point the CLI at the demo:\n%s", p.stdout.String())
		}
		status := exec.Command(testkit.Binary(t), "email", "status")
		status.Env = append(os.Environ(), m[1], m[2])
		if out, err := status.CombinedOutput(); err != nil || !strings.Contains(string(out), "assistant@agentmail.to") {
			t.Fatalf("paperclipai email status with the banner's environment: %v\n%s", err, out)
		}
		// The demo's inbox uses a saved AgentMail connection, so the
		// AgentMail pages show one.
		if conns := c.List("/api/companies/" + company + "/email/connections"); len(conns) != 1 {
			t.Fatalf("the demo saved %d AgentMail connections, want 1", len(conns))
		}
		// Re-run on the same home: the same company and inbox keep working,
		// and the emulator still has the old mail.
		p.stop(t)
		p2 := startDemo(t, home, url)
		c2 := testkit.NewClient(t, p2.url)
		if n := len(c2.List("/api/companies")); n != 1 {
			t.Fatalf("re-run seeded %d companies", n)
		}
		if n := len(c2.List("/api/companies/" + company + "/email/connections")); n != 1 {
			t.Fatalf("re-run has %d AgentMail connections, want the one", n)
		}
		if old := p2.outbox(t, "alice@example.com"); len(old) != 1 {
			t.Fatalf("the demo emulator forgot its outbox: %v", old)
		}
		// Alice answers the agent's reply from before the restart: the
		// mail joins the old thread, reopens the same task, and the agent
		// answers again and completes it again.
		follow := "From: Alice <alice@example.com>\r\nTo: assistant@agentmail.to\r\nSubject: Re: Where is my order?\r\n" +
			"Message-ID: <demo-follow@example.com>\r\nIn-Reply-To: " + replies[0]["message_id"].(string) + "\r\n" +
			"Date: " + time.Now().UTC().Format(time.RFC1123Z) + "\r\n\r\nAny news?\r\n"
		if err := smtp.SendMail(p2.smtp, nil, "alice@example.com", []string{"assistant@agentmail.to"}, []byte(follow)); err != nil {
			t.Fatalf("smtp: %v\n%s", err, p2.report())
		}
		var again []map[string]any
		p2.eventually(t, 90*time.Second, "the answer to the follow-up", func() bool {
			again = p2.outbox(t, "alice@example.com")
			return len(again) == 2
		})
		if again[1]["thread_id"] != replies[0]["thread_id"] || again[1]["in_reply_to"] != "<demo-follow@example.com>" {
			t.Fatalf("follow-up answer threading: %v", again[1])
		}
		if n := len(c2.List("/api/companies/" + company + "/issues?originKind=chat_channel")); n != 1 {
			t.Fatalf("the follow-up made %d email tasks, want the old one", n)
		}
		p2.eventually(t, 30*time.Second, "the reopened task done again", func() bool {
			return c2.JSON("GET", "/api/issues/"+task, nil, 200)["status"] == "done"
		})
		raw2 := strings.Replace(strings.Replace(raw, msgID, "<demo-second@example.com>", 1), "alice@", "bob@", 1)
		if err := smtp.SendMail(p2.smtp, nil, "bob@example.com", []string{"assistant@agentmail.to"}, []byte(raw2)); err != nil {
			t.Fatalf("smtp: %v\n%s", err, p2.report())
		}
		p2.eventually(t, 90*time.Second, "the reply after the re-run", func() bool {
			return len(p2.outbox(t, "bob@example.com")) == 1
		})
	})
}
