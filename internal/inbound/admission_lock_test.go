package inbound_test

import (
	"context"
	"testing"

	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/emulator"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// An admission never waits for the inbox row's share lock, which every
// processing transaction holds until it commits (PostgreSQL only: SQLite
// has no row locks). Recording the inbox's last event time used to wait
// for it, and every later fence queued behind that update: the admission
// → wake tail of new-thread mail. Here a transaction holds the lock for
// the whole admission; the mail must still be admitted (with the old
// update it waited until the lock was released) and is processed after.
func TestAdmissionDoesNotWaitForTheInboxShareLock(t *testing.T) {
	url := dbtest.PostgresURL(t)
	e := newEnv(t, url, "shared", nil)
	e.waitSocket()
	ctx := context.Background()
	if _, err := e.DB.ExecContext(ctx, `UPDATE email_endpoints SET last_event_at = NULL WHERE id = $1`, e.EpID); err != nil {
		t.Fatal(err)
	}
	tx, err := e.DB.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, `SELECT id FROM email_endpoints WHERE id = $1 FOR SHARE`, e.EpID); err != nil {
		t.Fatal(err)
	}
	e.deliver(emulator.DeliverRequest{Subject: "While processing holds the inbox", Text: "admit me"})
	testkit.Eventually(t, wait, "the mail admitted while the inbox row is share-locked", func() bool { return len(e.deliveries()) == 1 })
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	e.settled(1)
	testkit.MustEqual(t, "wakes", len(e.wakes()), 1)
}
