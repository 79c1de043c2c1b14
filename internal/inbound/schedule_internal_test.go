package inbound

import (
	"fmt"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/store"
)

// Periodic catch-up slots: every inbox keeps a fixed phase, consecutive
// scans are between half an interval and one and a half intervals apart,
// and a thousand inboxes that last scanned at the same moment spread their
// next scans over the interval instead of bursting.
func TestNextScanSpreadsInboxes(t *testing.T) {
	interval := 10 * time.Minute
	last := time.Date(2026, 1, 2, 10, 0, 0, 0, time.UTC)
	buckets := make([]int, 10)
	for i := range 1000 {
		id := fmt.Sprintf("inbox-%d", i)
		at := nextScan(id, last, interval, 0)
		if gap := at.Sub(last); gap <= interval/2 || gap > 3*interval/2 {
			t.Fatalf("%s: next scan %v after the last", id, gap)
		}
		again := nextScan(id, at, interval, 0)
		if again.Sub(at) != interval {
			t.Fatalf("%s: steady period %v, want %v", id, again.Sub(at), interval)
		}
		buckets[int(at.Sub(last.Add(interval/2))*10/interval)%10]++
	}
	for i, n := range buckets {
		// 100 expected per tenth of the interval.
		if n < 50 || n > 150 {
			t.Fatalf("tenth %d of the interval has %d of 1000 scans: %v", i, n, buckets)
		}
	}
}

// Slots fall on a grid of seconds (shifted by the process's offset, a
// quarter second here): 10,000 inboxes at the default
// 60 s interval wake a replica's scheduling loop at most 60 times a
// minute for their scans (once per slot second), not once per inbox, and
// the seconds still share the inboxes evenly.
func TestNextScanSlotsShareRounds(t *testing.T) {
	interval := 60 * time.Second
	last := time.Date(2026, 1, 2, 10, 0, 0, 123e6, time.UTC)
	per := map[time.Time]int{}
	for i := range 10000 {
		at := nextScan(fmt.Sprintf("inbox-%d", i), last, interval, 1250*time.Millisecond)
		if at.Nanosecond() != 250e6 {
			t.Fatalf("slot %v is off the grid", at)
		}
		per[at]++
	}
	if len(per) > 60 {
		t.Fatalf("%d distinct slots in one interval, want at most 60", len(per))
	}
	for at, n := range per {
		// About 167 per second.
		if n < 80 || n > 260 {
			t.Fatalf("slot %v holds %d of 10000 inboxes", at, n)
		}
	}
	// A short interval (tests) keeps a grid of a tenth of it.
	if got := scanSlot(2 * time.Second); got != 200*time.Millisecond {
		t.Fatalf("scanSlot(2s) = %v", got)
	}
}

func TestSoonestIgnoresZero(t *testing.T) {
	a := time.Unix(100, 0)
	b := time.Unix(200, 0)
	for _, c := range []struct{ x, y, want time.Time }{
		{time.Time{}, b, b}, {a, time.Time{}, a}, {a, b, a}, {b, a, a}, {time.Time{}, time.Time{}, time.Time{}},
	} {
		if got := soonest(c.x, c.y); !got.Equal(c.want) {
			t.Fatalf("soonest(%v, %v) = %v", c.x, c.y, got)
		}
	}
}

// A rescan read that began before this process wrote an inbox's health or
// recorded its scan does not take that inbox's older columns over the
// process's own; a read that began after does.
func TestApplyReadKeepsNewerOwnWrites(t *testing.T) {
	w := &Worker{inboxes: map[string]*inboxState{}, named: map[string]int{}, unknown: map[string]unknownWake{},
		sockets: map[string]*socketState{}, t: Timing{}.withDefaults()}
	t0 := time.Now()
	row := store.ActiveInbox{EmailEndpoint: domain.EmailEndpoint{ID: "in-1", ReceiveMode: domain.ReceiveWebSocket, HealthMessage: "old"}}
	w.applyRead(&rescanRead{started: t0, rows: []store.ActiveInbox{row}}, t0)
	st := w.inboxes["in-1"]
	synced := t0.Add(time.Second)
	st.health, st.healthAt = healthConnected, t0.Add(2*time.Second)
	st.ep.LastSyncAt, st.recordedAt, st.catchupAt = &synced, t0.Add(2*time.Second), t0.Add(time.Hour)
	// Began before both writes: keeps them, forces no catch-up.
	w.applyRead(&rescanRead{started: t0.Add(time.Second), rows: []store.ActiveInbox{row}}, t0.Add(3*time.Second))
	if st.health != healthConnected || st.ep.LastSyncAt == nil || !st.catchupAt.Equal(t0.Add(time.Hour)) {
		t.Fatalf("a stale read overwrote newer state: health %q, last sync %v, catch-up %v", st.health, st.ep.LastSyncAt, st.catchupAt)
	}
	// Began after: the database's columns win (a forced catch-up).
	now := t0.Add(4 * time.Second)
	w.applyRead(&rescanRead{started: t0.Add(3 * time.Second), rows: []store.ActiveInbox{row}}, now)
	if st.health != "old" || st.ep.LastSyncAt != nil || !st.catchupAt.Equal(now) {
		t.Fatalf("a fresh read was not taken: health %q, last sync %v, catch-up %v", st.health, st.ep.LastSyncAt, st.catchupAt)
	}
	// A read without the inbox forgets it.
	w.applyRead(&rescanRead{started: now}, now)
	if len(w.inboxes) != 0 {
		t.Fatalf("a stopped inbox stayed scheduled")
	}
}

// A named wake for an inbox no read listed yet waits for a read that began
// after it: such a read that lists the inbox turns it into a named wake,
// one that does not list it drops it, and an older read leaves it waiting.
func TestApplyReadResolvesUnknownWakes(t *testing.T) {
	w := &Worker{inboxes: map[string]*inboxState{}, named: map[string]int{}, unknown: map[string]unknownWake{},
		sockets: map[string]*socketState{}, t: Timing{}.withDefaults()}
	t0 := time.Now()
	w.unknown["new"] = unknownWake{kinds: wakeDeliveries, at: t0}
	w.unknown["gone"] = unknownWake{kinds: wakeDeliveries, at: t0}
	w.applyRead(&rescanRead{started: t0.Add(-time.Second)}, t0)
	if len(w.unknown) != 2 {
		t.Fatalf("a read older than the wakes resolved them: %v", w.unknown)
	}
	row := store.ActiveInbox{EmailEndpoint: domain.EmailEndpoint{ID: "new", ReceiveMode: domain.ReceiveWebSocket}}
	w.applyRead(&rescanRead{started: t0.Add(time.Second), rows: []store.ActiveInbox{row}}, t0.Add(time.Second))
	if len(w.unknown) != 0 || w.named["new"] != wakeDeliveries || w.named["gone"] != 0 {
		t.Fatalf("unknown %v, named %v", w.unknown, w.named)
	}
}
