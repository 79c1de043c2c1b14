package ui

import (
	"net/netip"
	"testing"
	"time"
)

// The limiter's memory is bounded without forgetting everyone at once:
// past its size it forgets the prefix whose last failure is oldest, so a
// spray of new addresses does not lift a block that is still being hit.
func TestLoginLimiterForgetsOneAtATime(t *testing.T) {
	l := newLoginLimiter(3)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := 0; i < loginFailLimit; i++ {
		l.fail("a", now)
	}
	l.fail("b", now.Add(time.Second))
	l.fail("c", now.Add(2*time.Second))
	// "a" fails again: now the most recent; "b" is the oldest.
	l.fail("a", now.Add(3*time.Second))
	l.fail("d", now.Add(4*time.Second))
	if !l.blocked("a", now.Add(5*time.Second)) {
		t.Fatal("a new address made the limiter forget a blocked one")
	}
	if l.lru.Len() != 3 {
		t.Fatalf("%d prefixes remembered, want 3", l.lru.Len())
	}
	if _, ok := l.byKey["b"]; ok {
		t.Fatal("the oldest prefix was kept past the bound")
	}
	// Failures expire with the window.
	if l.blocked("a", now.Add(loginFailWindow+4*time.Second)) {
		t.Fatal("the block outlived its window")
	}
	// IPv6 addresses are counted per /64, IPv4 per address.
	for i, tc := range []struct{ a, b string }{{"2001:db8::1", "2001:db8::ffff:1"}, {"203.0.113.1", "203.0.113.1"}} {
		if limiterKey(netip.MustParseAddr(tc.a)) != limiterKey(netip.MustParseAddr(tc.b)) {
			t.Errorf("case %d: %s and %s counted apart", i, tc.a, tc.b)
		}
	}
	if limiterKey(netip.MustParseAddr("203.0.113.1")) == limiterKey(netip.MustParseAddr("203.0.113.2")) {
		t.Error("two IPv4 addresses counted together")
	}
}
