package inbound_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/emulator"
	"github.com/paperclipai/paperclipai/internal/inbound/queue"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// Two replicas (PostgreSQL only: SQLite
// allows one server per home): two replicas on one database hold exactly
// one socket for the inbox; both workers admitting and processing the same
// message give one task and one wake; after the holder shuts down the other
// replica takes the socket over without waiting for the lease to expire.
func TestTwoReplicasShareOneSocket(t *testing.T) {
	url := dbtest.PostgresURL(t)
	e := newEnv(t, url, "shared", nil)
	// Replicas share the vault master key, as a deployment must.
	key, err := os.ReadFile(filepath.Join(e.Home, "instance", "secrets", "master.key"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := testkit.EmailConfig(testkit.Config(t, url), e.Em)
	cfg.MasterKeyB64 = strings.TrimSpace(string(key))
	other := testkit.Start(t, cfg)
	testkit.Eventually(t, wait, "one socket", func() bool {
		return e.Em.WebSocketCount() == 1 && (e.Inbound.SocketConnected(e.EpID) || other.Inbound.SocketConnected(e.EpID))
	})
	for range 20 {
		if n := e.Em.WebSocketCount(); n != 1 {
			t.Fatalf("%d sockets for one inbox", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	res := e.deliver(emulator.DeliverRequest{Subject: "Both replicas", Text: "one task please"})
	// The second replica also admits the message, as a webhook would.
	if _, err := other.Inbound.AdmitRaw(context.Background(), e.endpoint(), receivedFrame(e.Address, res.MessageID, res.ThreadID), queue.SourceWebhook); err != nil {
		t.Fatal(err)
	}
	e.settled(1)
	testkit.MustEqual(t, "tasks", len(e.tasks()), 1)
	testkit.MustEqual(t, "wakes", len(e.wakes()), 1)

	holder, successor := e.Instance, other
	if other.Inbound.SocketConnected(e.EpID) {
		holder, successor = other, e.Instance
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := holder.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	// Well before the 90 s lease would expire.
	testkit.Eventually(t, 15*time.Second, "the other replica takes the socket", func() bool {
		return successor.Inbound.SocketConnected(e.EpID) && e.Em.WebSocketCount() == 1
	})
}

// A replica whose lease renewal hangs (here: the leases table is locked)
// closes its sockets while their leases are still its own, a renewal
// period before they lapse, instead of keeping them open until the
// statement returns while another replica takes them over; once the
// database answers again the socket comes back (PostgreSQL: the shared
// database of several replicas).
func TestStuckRenewalClosesSocketsBeforeTheLeaseLapses(t *testing.T) {
	url := dbtest.PostgresURL(t)
	e := newEnv(t, url, "stuck", nil)
	e.waitSocket()
	ctx := context.Background()
	tx, err := e.DB.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `LOCK TABLE email_leases IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, wait, "the socket closed while its renewal hangs", func() bool { return e.Em.WebSocketCount() == 0 })
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, wait, "the socket back", func() bool { return e.Em.WebSocketCount() == 1 })
}
