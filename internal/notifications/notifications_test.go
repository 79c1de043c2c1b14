package notifications_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	svix "github.com/svix/svix-webhooks/go"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// receiver records the webhook requests it gets; it answers 500 to the
// first fail requests.
type receiver struct {
	mu   sync.Mutex
	got  []recorded
	fail int
}

type recorded struct {
	header http.Header
	body   []byte
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.got = append(rc.got, recorded{r.Header.Clone(), b})
	if rc.fail > 0 {
		rc.fail--
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (rc *receiver) all() []recorded {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]recorded(nil), rc.got...)
}

// A held email notifies the company's webhooks: the Standard Webhooks
// signature verifies with the official svix library, a failed attempt is
// retried with the same webhook-id and the delivery log shows both, and a
// Slack-format webhook gets {"text": …}. Private URLs are refused for
// anyone but an instance administrator; the secret is shown once.
func TestReviewRequestedWebhookIsSignedAndRetried(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := testkit.NewEmailEnv(t, url)
		ep := e.Setup("notify", map[string]any{"receiveMode": "websocket"})
		std := &receiver{fail: 1}
		slack := &receiver{}
		stdSrv, slackSrv := httptest.NewServer(std), httptest.NewServer(slack)
		t.Cleanup(stdSrv.Close)
		t.Cleanup(slackSrv.Close)
		hooks := "/api/companies/" + e.CompanyID + "/notification-webhooks"

		// Validation and the private-address rule.
		for _, bad := range []map[string]any{{"url": "ftp://x", "events": []string{"email.review_requested"}},
			{"url": stdSrv.URL, "events": []string{"email.nope"}}, {"url": stdSrv.URL, "events": []string{}},
			{"url": stdSrv.URL, "events": []string{"email.review_requested"}, "format": "xml"}} {
			if st, _ := e.Board.Do("POST", hooks, bad); st != 400 {
				t.Fatalf("invalid webhook %v: %d", bad, st)
			}
		}
		m := e.Board.JSON("POST", "/api/companies/"+e.CompanyID+"/members", map[string]any{"email": "admin@example.com", "role": "admin"}, 201)
		k := e.Board.JSON("POST", "/api/companies/"+e.CompanyID+"/board-keys", map[string]any{"userId": m["userId"]}, 201)
		admin := e.Board.As(k["token"].(string), "")
		if st, body := admin.Do("POST", hooks, map[string]any{"url": stdSrv.URL, "events": []string{"email.review_requested"}}); st != 403 ||
			!strings.Contains(string(body), "public address") {
			t.Fatalf("a company admin's private webhook: %d %s", st, body)
		}

		// The local board is the instance administrator: loopback is allowed.
		created := e.Board.JSON("POST", hooks, map[string]any{"url": stdSrv.URL, "events": []string{"email.review_requested", "email.send_failed"}}, 201)
		secret, _ := created["secret"].(string)
		if !strings.HasPrefix(secret, "whsec_") {
			t.Fatalf("created webhook: %v", created)
		}
		e.Board.JSON("POST", hooks, map[string]any{"url": slackSrv.URL, "events": []string{"email.review_requested"}, "format": "slack"}, 201)
		list := e.Board.JSON("GET", hooks, nil, 200)
		if b, _ := json.Marshal(list); strings.Contains(string(b), secret) || strings.Contains(string(b), "whsec_") {
			t.Fatal("the webhook listing shows a secret")
		}

		// A held send emits email.review_requested.
		e.Board.JSON("PUT", "/api/email/inboxes/"+testkit.ID(ep)+"/send-policy", map[string]any{"review": "all"}, 200)
		parent := testkit.ID(e.Board.JSON("POST", "/api/companies/"+e.CompanyID+"/issues", map[string]any{"title": "P", "assigneeAgentId": e.AgentID}, 201))
		key := testkit.NewUUID()
		e.Board.JSON("POST", "/api/companies/"+e.CompanyID+"/email/send", map[string]any{"endpointId": ep["id"], "parentIssueId": parent,
			"to": []string{"lead@example.com"}, "subject": "Hello", "text": "Hi", "idempotencyKey": key}, 202)

		testkit.Eventually(t, 60*time.Second, "the webhook delivered after one retry", func() bool { return len(std.all()) == 2 })
		got := std.all()
		if got[0].header.Get("webhook-id") == "" || got[0].header.Get("webhook-id") != got[1].header.Get("webhook-id") {
			t.Fatalf("webhook-id across attempts: %q %q", got[0].header.Get("webhook-id"), got[1].header.Get("webhook-id"))
		}
		wh, err := svix.NewWebhook(secret)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range got {
			if err := wh.Verify(r.body, r.header); err != nil {
				t.Fatalf("svix verification: %v", err)
			}
		}
		tampered := append([]byte(nil), got[1].body...)
		tampered[len(tampered)-2] ^= 1
		if wh.Verify(tampered, got[1].header) == nil {
			t.Fatal("svix verified a tampered body")
		}
		var ev struct {
			Type string         `json:"type"`
			Data map[string]any `json:"data"`
		}
		if err := json.Unmarshal(got[1].body, &ev); err != nil || ev.Type != "email.review_requested" || ev.Data["publicationId"] != key {
			t.Fatalf("event body: %s (%v)", got[1].body, err)
		}
		log := e.Board.JSON("GET", hooks+"/"+testkit.ID(created)+"/deliveries", nil, 200)["items"].([]any)
		if len(log) != 1 || log[0].(map[string]any)["state"] != "delivered" || log[0].(map[string]any)["attempts"] != float64(2) {
			t.Fatalf("delivery log: %v", log)
		}

		testkit.Eventually(t, 30*time.Second, "the Slack post", func() bool { return len(slack.all()) == 1 })
		var text map[string]string
		if err := json.Unmarshal(slack.all()[0].body, &text); err != nil || !strings.Contains(text["text"], "waiting for review") ||
			!strings.Contains(text["text"], key) || len(text) != 1 {
			t.Fatalf("slack body: %s", slack.all()[0].body)
		}
	})
}
