package conformance_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/emulator"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// cli runs the built paperclipai binary against the env's server as the
// local board, with stdin, and returns its exit code, stdout and stderr.
func (e *env) cli(stdin []byte, args ...string) (int, string, string) {
	e.t.Helper()
	cmd := exec.Command(testkit.Binary(e.t), args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PAPERCLIP_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "PAPERCLIP_API_URL="+e.URL()+"/api", "PAPERCLIP_COMPANY_ID="+e.CompanyID)
	cmd.Stdin = bytes.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		e.t.Fatal(err)
	}
	return code, out.String(), errb.String()
}

func writeJSON(t *testing.T, v any) string {
	t.Helper()
	f, err := os.CreateTemp(t.TempDir(), "req-*.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.NewEncoder(f).Encode(v); err != nil {
		t.Fatal(err)
	}
	f.Close()
	return f.Name()
}

// `paperclipai email send`, `reply` and `delivery` as a script or agent
// runs them, and the send/reply mode guard on both sides: the CLI refuses
// the wrong verb before calling, and the API refuses mixed requests.
func TestEmailCLISendReplyDelivery(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := newEnv(t, url)
		e.connect("clerk", nil)
		e.deliver(emulator.DeliverRequest{Subject: "Need a quote", Text: "How much for 10?"})
		task := e.task("Need a quote")
		reply := e.reply(task, "Ten cost 100.")
		newEmail := e.newEmail("buyer@example.com", "Our offer")

		code, out, stderr := e.cli(nil, "email", "send", "--file", writeJSON(t, newEmail))
		if code != 0 {
			t.Fatalf("email send: %d %s", code, stderr)
		}
		var sent map[string]any
		if err := json.Unmarshal([]byte(out), &sent); err != nil || sent["id"] != newEmail["idempotencyKey"] || sent["outcome"] != "queued" {
			t.Fatalf("email send printed %s (%v)", out, err)
		}
		raw, _ := json.Marshal(reply)
		code, out, stderr = e.cli(raw, "email", "reply", "--file", "-")
		if code != 0 || !strings.Contains(out, reply["idempotencyKey"].(string)) {
			t.Fatalf("email reply: %d %s %s", code, out, stderr)
		}
		for _, id := range []string{newEmail["idempotencyKey"].(string), reply["idempotencyKey"].(string)} {
			var d map[string]any
			testkit.Eventually(t, wait, "email delivery "+id+" to say delivered", func() bool {
				code, out, stderr := e.cli(nil, "email", "delivery", id)
				if code != 0 {
					t.Fatalf("email delivery: %d %s", code, stderr)
				}
				_ = json.Unmarshal([]byte(out), &d)
				return d["outcome"] == "delivered"
			})
			if d["providerMessageId"] == nil || d["sentAt"] == nil || d["deliveredAt"] == nil {
				t.Fatalf("delivery summary: %v", d)
			}
		}
		code, _, stderr = e.cli(nil, "email", "delivery", testkit.NewUUID())
		if code == 0 || !strings.Contains(stderr, "HTTP 404") {
			t.Fatalf("unknown delivery: %d %s", code, stderr)
		}

		// The CLI's guard: the verb must match the request.
		before := e.providerSends()
		code, _, stderr = e.cli(nil, "email", "send", "--file", writeJSON(t, e.reply(task, "again")))
		if code == 0 || !strings.Contains(stderr, "use `email reply`") {
			t.Fatalf("send with a reply request: %d %s", code, stderr)
		}
		code, _, stderr = e.cli(nil, "email", "reply", "--file", writeJSON(t, e.newEmail("x@example.com", "Wrong verb")))
		if code == 0 || !strings.Contains(stderr, "use `email send`") {
			t.Fatalf("reply with a new-email request: %d %s", code, stderr)
		}
		// The API's guard, for clients that bypass the CLI.
		mixed := e.reply(task, "to someone else")
		mixed["to"] = []string{"other@example.com"}
		st, body := e.Board.Do("POST", e.sendPath(), mixed)
		if st != http.StatusBadRequest || !strings.Contains(string(body), "A reply cannot set to: reply recipients come from the original message") {
			t.Fatalf("reply with recipients: %d %s", st, body)
		}
		asReply := e.newEmail("x@example.com", "Half reply")
		asReply["replyToMessageId"] = "<x@example.com>"
		st, body = e.Board.Do("POST", e.sendPath(), asReply)
		if st != http.StatusBadRequest || !strings.Contains(string(body), "A new email cannot be a reply") {
			t.Fatalf("new email with a reply target: %d %s", st, body)
		}
		noSubject := e.newEmail("x@example.com", "No subject")
		delete(noSubject, "subject")
		st, body = e.Board.Do("POST", e.sendPath(), noSubject)
		if st != http.StatusBadRequest || !strings.Contains(string(body), "requires a parent task, recipient, and subject") {
			t.Fatalf("new email without subject: %d %s", st, body)
		}
		time.Sleep(200 * time.Millisecond)
		testkit.MustEqual(t, "provider sends after refused requests", e.providerSends(), before)

		// A rate limit (429) prints its Retry-After and exits 75, so a
		// script knows to retry the identical request later.
		e.Board.JSON("POST", "/api/companies/"+e.CompanyID+"/action-policies", map[string]any{"action": "email.send", "effect": "allow",
			"rateLimitCount": 1, "rateLimitWindowSeconds": 3600}, 201)
		if code, _, stderr := e.cli(nil, "email", "send", "--file", writeJSON(t, e.newEmail("buyer@example.com", "Within the limit"))); code != 0 {
			t.Fatalf("send within the limit: %d %s", code, stderr)
		}
		code, _, stderr = e.cli(nil, "email", "send", "--file", writeJSON(t, e.newEmail("buyer@example.com", "Over the limit")))
		if code != 75 || !strings.Contains(stderr, "Email send limit reached") || !strings.Contains(stderr, "(HTTP 429); retry after ") ||
			!strings.Contains(stderr, "(Retry-After: ") {
			t.Fatalf("send over the limit: %d %s", code, stderr)
		}
	})
}
