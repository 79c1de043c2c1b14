package netguard_test

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"testing"

	"github.com/paperclipai/paperclipai/internal/netguard"
)

func TestPublicHostAndDialer(t *testing.T) {
	ctx := context.Background()
	for _, h := range []string{"127.0.0.1", "localhost", "app.localhost", "::1", "10.1.2.3", "169.254.169.254", "100.64.0.1",
		"192.168.0.1", "0.0.0.0", "[::1]", "does-not-resolve.invalid", ""} {
		if netguard.PublicHost(ctx, h) {
			t.Errorf("PublicHost(%q) = true", h)
		}
	}
	for _, h := range []string{"8.8.8.8", "2001:4860:4860::8888"} {
		if !netguard.PublicHost(ctx, h) {
			t.Errorf("PublicHost(%q) = false", h)
		}
	}
	if !netguard.PublicAddr(netip.MustParseAddr("127.0.0.1"), true) || netguard.PublicAddr(netip.MustParseAddr("::ffff:10.0.0.1"), true) {
		t.Error("PublicAddr with allowLoopback")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if _, err := netguard.Dialer(false).Dial("tcp", ln.Addr().String()); !errors.Is(err, netguard.ErrBlocked) {
		t.Fatalf("dial loopback: %v, want ErrBlocked", err)
	}
	c, err := netguard.Dialer(true).Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatalf("dial loopback when allowed: %v", err)
	}
	c.Close()
}
