package conformance_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/emulator"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// webhookEnv is an env whose emulator delivers webhooks to the server
// through a loopback TLS front (the server's public HTTPS URL). While
// loseAck is set, the front passes the next webhook to the server but
// answers the emulator 502, as a connection lost after the server's
// answer would: the emulator then delivers the event again.
type webhookEnv struct {
	*env
	loseAck atomic.Bool
}

func newWebhookEnv(t *testing.T, databaseURL string) *webhookEnv {
	t.Helper()
	w := &webhookEnv{}
	var backend atomic.Pointer[url.URL]
	front := httptest.NewUnstartedServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		proxy := httputil.NewSingleHostReverseProxy(backend.Load())
		if w.loseAck.CompareAndSwap(true, false) {
			proxy.ServeHTTP(httptest.NewRecorder(), r)
			http.Error(rw, "the answer was lost", http.StatusBadGateway)
			return
		}
		proxy.ServeHTTP(rw, r)
	}))
	front.StartTLS()
	t.Cleanup(front.Close)
	em, err := emulator.Start(context.Background(), emulator.Options{DeliveryDelay: -1, WebhookTransport: front.Client().Transport})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { em.Close() })
	em.SetWebhookRetryDelays([]time.Duration{0, 50 * time.Millisecond, 200 * time.Millisecond, time.Second})
	cfg := testkit.EmailConfig(testkit.Config(t, databaseURL), em)
	cfg.PublicURL = front.URL
	inst := testkit.Start(t, cfg)
	u, _ := url.Parse(inst.URL())
	backend.Store(u)
	board := testkit.NewClient(t, inst.URL())
	board.JSON("PATCH", "/api/instance/settings", map[string]any{"experimental": map[string]any{"enableChatConnectors": true}}, 200)
	cid := testkit.ID(board.JSON("POST", "/api/companies", map[string]any{"name": "Hook Co"}, 201))
	aid := testkit.ID(board.JSON("POST", "/api/companies/"+cid+"/agents", map[string]any{"name": "Hook Agent", "adapterType": "process",
		"adapterConfig": map[string]any{"command": "/bin/true"}}, 201))
	_, key := em.CreateOrganization("Hook Mail")
	w.env = &env{EmailEnv: &testkit.EmailEnv{Instance: inst, Em: em, Board: board, CompanyID: cid, AgentID: aid, OrgKey: key}, t: t}
	return w
}

// The webhook side of the stage metrics: mail admitted from a signed
// webhook is counted under source webhook, and a webhook whose answer was
// lost (so the provider delivers it again) is counted as a duplicate and
// still makes one task and one wake.
func TestWebhookStageMetrics(t *testing.T) {
	dbtest.EachURL(t, func(t *testing.T, _ db.Dialect, url string) {
		e := newWebhookEnv(t, url)
		e.connect("hooked", map[string]any{"receiveMode": "webhook"})
		e.loseAck.Store(true)
		res := e.deliver(emulator.DeliverRequest{Subject: "Over a webhook", Text: "signed"})
		task := e.task("Over a webhook")
		testkit.Eventually(t, wait, "the redelivery to be counted", func() bool {
			return e.scrape()[`paperclip_email_deliveries_total{outcome="duplicate"}`] >= 1
		})
		e.settled()
		if d, ok := e.deliveryOf(res.MessageID); !ok || d.Source != "webhook" {
			t.Fatalf("delivery: %+v %v", d, ok)
		}
		if e.loseAck.Load() {
			t.Fatal("no webhook went through the front")
		}
		testkit.Eventually(t, wait, "the wake", func() bool { return len(e.wakes(task)) == 1 })
		m := e.scrape()
		for name, min := range map[string]float64{
			`paperclip_email_admission_seconds_count{source="webhook"}`: 2,
			`paperclip_email_deliveries_total{outcome="processed"}`:     1,
			`paperclip_email_deliveries_total{outcome="duplicate"}`:     1,
			`paperclip_email_admission_to_wake_seconds_count`:           1,
		} {
			if v, ok := m[name]; !ok || v < min {
				t.Errorf("%s = %v (present %v), want at least %v", name, v, ok, min)
			}
		}
		for name, want := range map[string]float64{
			`paperclip_email_inboxes{mode="webhook",status="active"}`:   1,
			`paperclip_email_inboxes{mode="websocket",status="active"}`: 0,
			`paperclip_email_sockets_connected`:                         0,
		} {
			if v, ok := m[name]; !ok || v != want {
				t.Errorf("%s = %v (present %v), want %v", name, v, ok, want)
			}
		}
		testkit.MustEqual(t, "tasks", len(e.tasksTitled("Over a webhook")), 1)
		testkit.MustEqual(t, "wakes", len(e.wakes(task)), 1)
	})
}
