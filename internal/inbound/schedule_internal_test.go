package inbound

import (
	"fmt"
	"testing"
	"time"
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
		at := nextScan(id, last, interval)
		if gap := at.Sub(last); gap <= interval/2 || gap > 3*interval/2 {
			t.Fatalf("%s: next scan %v after the last", id, gap)
		}
		again := nextScan(id, at, interval)
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
