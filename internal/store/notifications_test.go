package store_test

import (
	"context"
	"database/sql"
	"sync"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/dbtest"
	"github.com/paperclipai/paperclipai/internal/store"
)

// TestNotificationMarksEmitOnce: a notification mark reports each state
// change once. The first sighting is a silent baseline (or a change, with
// EmitFirst); a change is reported at once after a baseline; a state that
// flaps inside the quiet period is left until the period ends and then
// reported as the state it settled in (or not at all, when it settled
// back); Repeat re-arms the same value after the quiet period; and of
// concurrent transactions that see the same change (replicas) exactly one
// moves the mark.
func TestNotificationMarksEmitOnce(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d *db.DB) {
		ctx := context.Background()
		st := store.New(d)
		var mu sync.Mutex
		offset := time.Duration(0)
		st.SetClock(func() time.Time { mu.Lock(); defer mu.Unlock(); return time.Now().Add(offset) })
		advance := func(by time.Duration) { mu.Lock(); offset += by; mu.Unlock() }
		c, err := st.CreateCompany(ctx, d, "Marks", "")
		if err != nil {
			t.Fatal(err)
		}
		swap := func(key, value string, quiet time.Duration, repeat, first bool) store.MarkChange {
			t.Helper()
			var ch store.MarkChange
			if err := st.Tx(ctx, func(tx *sql.Tx) error {
				var err error
				ch, err = st.SwapNotificationMark(ctx, tx, store.NotificationMark{CompanyID: c.ID, Key: key, Value: value,
					Quiet: quiet, Repeat: repeat, EmitFirst: first})
				return err
			}); err != nil {
				t.Fatal(err)
			}
			return ch
		}
		const q = 10 * time.Minute
		if ch := swap("health", "ok", q, false, false); ch.Changed || !ch.First {
			t.Fatalf("baseline: %+v", ch)
		}
		if ch := swap("health", "ok", q, false, false); ch.Changed {
			t.Fatalf("unchanged: %+v", ch)
		}
		if ch := swap("health", "attention", q, false, false); !ch.Changed || ch.Previous != "ok" {
			t.Fatalf("first change after the baseline: %+v", ch)
		}
		// Flapping inside the quiet period: nothing more.
		for _, v := range []string{"ok", "attention", "ok"} {
			if ch := swap("health", v, q, false, false); ch.Changed {
				t.Fatalf("flap to %s reported: %+v", v, ch)
			}
		}
		advance(q + time.Second)
		if ch := swap("health", "attention", q, false, false); ch.Changed {
			t.Fatalf("settled back where it was reported: %+v", ch)
		}
		if ch := swap("health", "ok", q, false, false); !ch.Changed || ch.Previous != "attention" {
			t.Fatalf("settled in a new state after the quiet period: %+v", ch)
		}
		if v, err := st.NotificationMarkValue(ctx, d, "health"); err != nil || v != "ok" {
			t.Fatalf("mark value %q %v", v, err)
		}

		// EmitFirst and Repeat: an alert at most once per quiet period.
		if ch := swap("bounce", "high", 24*time.Hour, true, true); !ch.Changed || !ch.First {
			t.Fatalf("first alert: %+v", ch)
		}
		if ch := swap("bounce", "high", 24*time.Hour, true, true); ch.Changed {
			t.Fatalf("alert repeated within the day: %+v", ch)
		}
		advance(24*time.Hour + time.Second)
		if ch := swap("bounce", "high", 24*time.Hour, true, true); !ch.Changed {
			t.Fatalf("alert not repeated after the day: %+v", ch)
		}

		// Replicas: eight concurrent transactions see the same change.
		swap("race", "a", 0, false, false)
		var wg sync.WaitGroup
		var changed sync.Map
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := st.Tx(ctx, func(tx *sql.Tx) error {
					ch, err := st.SwapNotificationMark(ctx, tx, store.NotificationMark{CompanyID: c.ID, Key: "race", Value: "b"})
					if err == nil && ch.Changed {
						changed.Store(i, true)
					}
					return err
				})
				if err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		n := 0
		changed.Range(func(any, any) bool { n++; return true })
		if n != 1 {
			t.Fatalf("%d of 8 concurrent transactions moved the mark, want 1", n)
		}
	})
}
