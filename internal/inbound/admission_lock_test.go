package inbound_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/emulator"
	"github.com/paperclipai/paperclipai/internal/inbound"
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

// A new thread's receiving transaction records its wake while another
// transaction holds the company's task counter row (PostgreSQL only:
// SQLite has one writer): the task is numbered by the transaction's last
// statement. Numbered at creation, every new-thread transaction of a
// company held that row's lock until commit, so they committed one at a
// time: the lock wait that sampling pg_stat_activity found under most of
// the new-thread admission → wake tail. Checked by order (the wake is
// recorded before the lock is released), not by time; the task still
// gets the company's next number once the lock is free.
func TestNewThreadWakesWhileTheTaskCounterIsLocked(t *testing.T) {
	url := dbtest.PostgresURL(t)
	e := newEnv(t, url, "counter", nil)
	e.waitSocket()
	var mu sync.Mutex
	woken := map[string]bool{}
	inbound.SetStageTrace(func(stage, id string) {
		if stage == "woken" {
			mu.Lock()
			woken[id] = true
			mu.Unlock()
		}
	})
	t.Cleanup(func() { inbound.SetStageTrace(nil) })
	ctx := context.Background()
	var counter int64
	if err := e.DB.QueryRowContext(ctx, `SELECT issue_counter FROM companies WHERE id = $1`, e.CompanyID).Scan(&counter); err != nil {
		t.Fatal(err)
	}
	tx, err := e.DB.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, `UPDATE companies SET issue_counter = issue_counter WHERE id = $1`, e.CompanyID); err != nil {
		t.Fatal(err)
	}
	e.deliver(emulator.DeliverRequest{From: "new@example.com", Subject: "A new thread while the counter is locked", Text: "hello"})
	testkit.Eventually(t, wait, "the mail admitted", func() bool { return len(e.deliveries()) == 1 })
	id := e.deliveries()[0].ID
	testkit.Eventually(t, wait, "the wake recorded while the task counter is locked", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return woken[id]
	})
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	e.settled(1)
	tasks := e.tasks()
	testkit.MustEqual(t, "tasks", len(tasks), 1)
	testkit.MustEqual(t, "task number", tasks[0].Number, counter+1)
	if !strings.HasSuffix(tasks[0].Identifier, fmt.Sprintf("-%d", counter+1)) {
		t.Fatalf("task identifier %q, want the number %d", tasks[0].Identifier, counter+1)
	}
	testkit.MustEqual(t, "wakes", len(e.wakes()), 1)
}
