package db_test

import (
	"context"
	"database/sql"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
)

func TestMigrateIsIdempotent(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		ctx := context.Background()
		if err := d.Migrate(ctx, nil); err != nil {
			t.Fatalf("second migrate: %v", err)
		}
		var n int
		if err := d.QueryRowContext(ctx, `SELECT COUNT(*) FROM companies`).Scan(&n); err != nil {
			t.Fatalf("query: %v", err)
		}
	})
}

func TestUniqueViolationIsRecognised(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		ctx := context.Background()
		q := `INSERT INTO users (id, email, created_at) VALUES ($1, $2, CURRENT_TIMESTAMP)`
		if _, err := d.ExecContext(ctx, q, "u1", "a@example.com"); err != nil {
			t.Fatal(err)
		}
		_, err := d.ExecContext(ctx, q, "u2", "a@example.com")
		if !db.IsUniqueViolation(err) {
			t.Fatalf("want unique violation, got %v", err)
		}
	})
}

func TestSavepointRollsBackOnlyItsOwnStatements(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		ctx := context.Background()
		q := `INSERT INTO users (id, email, created_at) VALUES ($1, $2, CURRENT_TIMESTAMP)`
		injected := errors.New("injected")
		err := d.Tx(ctx, func(tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, q, "outer", "outer@example.com"); err != nil {
				return err
			}
			fnErr, err := db.Savepoint(ctx, tx, "inner_step", func() error {
				if _, err := tx.ExecContext(ctx, q, "inner", "inner@example.com"); err != nil {
					return err
				}
				return injected
			})
			if err != nil || !errors.Is(fnErr, injected) {
				t.Fatalf("Savepoint = %v, %v", fnErr, err)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		var n int
		if err := d.QueryRowContext(ctx, `SELECT COUNT(*) FROM users WHERE id IN ('outer', 'inner')`).Scan(&n); err != nil || n != 1 {
			t.Fatalf("rows after commit: %d %v; want only the outer one", n, err)
		}
	})
}

func TestListenReceivesCommittedNotifications(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		if d.Dialect != db.Postgres {
			if err := d.Listen(ctx, "test_channel", func() {}); !errors.Is(err, db.ErrNoListen) {
				t.Fatalf("Listen on %s = %v, want ErrNoListen", d.Dialect, err)
			}
			if err := d.Tx(ctx, func(tx *sql.Tx) error { return d.NotifyTx(ctx, tx, "test_channel") }); err != nil {
				t.Fatalf("NotifyTx is a no-op on %s: %v", d.Dialect, err)
			}
			return
		}
		got := make(chan struct{}, 10)
		done := make(chan error, 1)
		go func() { done <- d.Listen(ctx, "test_channel", func() { got <- struct{}{} }) }()
		// LISTEN takes effect asynchronously: notify until the first one
		// arrives (each is a real, committed notification).
		for arrived := false; !arrived; {
			if err := d.Tx(ctx, func(tx *sql.Tx) error { return d.NotifyTx(ctx, tx, "test_channel") }); err != nil {
				t.Fatal(err)
			}
			select {
			case <-got:
				arrived = true
			case <-time.After(100 * time.Millisecond):
			}
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Listen after cancel: %v", err)
		}
	})
}

// Follow listens again on its own after the database restarts (an
// immediate stop drops the listener's connection): it reports the lost
// connection, wakes its caller once listening again (notifications sent
// meanwhile are lost), and delivers new notifications. The time from the
// database accepting connections to listening again is logged.
func TestFollowSurvivesADatabaseRestart(t *testing.T) {
	c := dbtest.StartCluster(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d, err := db.Open(ctx, c.URL(), "")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	got := make(chan struct{}, 100)
	var lost atomic.Int32
	done := make(chan error, 1)
	go func() {
		done <- d.Follow(ctx, "test_follow", func() { got <- struct{}{} }, func(error) { lost.Add(1) })
	}()
	// notifyUntilHeard sends committed notifications until one arrives.
	notifyUntilHeard := func() {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			_ = d.Tx(ctx, func(tx *sql.Tx) error { return d.NotifyTx(ctx, tx, "test_follow") })
			select {
			case <-got:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
		t.Fatal("no notification arrived")
	}
	<-got // listening
	notifyUntilHeard()
	c.Stop()
	c.Start()
	back := time.Now()
	select {
	case <-got: // listening again
	case <-time.After(30 * time.Second):
		t.Fatal("Follow did not listen again after the restart")
	}
	t.Logf("listening again %v after the database accepted connections", time.Since(back).Round(time.Millisecond))
	if lost.Load() == 0 {
		t.Fatal("the lost connection was not reported")
	}
	for len(got) > 0 {
		<-got
	}
	notifyUntilHeard()
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Follow after cancel: %v", err)
	}
}
