package config_test

import (
	"net/netip"
	"testing"

	"github.com/paperclipai/paperclipai/internal/config"
)

// The sign-in throttle's client address (issue 28 item 7): only a
// configured trusted proxy's X-Forwarded-For counts, and only its
// right-most untrusted hop.
func TestClientAddr(t *testing.T) {
	ps, err := config.ParseTrustedProxies("10.0.0.1, 192.168.0.0/16,fd00::/8")
	if err != nil {
		t.Fatal(err)
	}
	c := config.Config{TrustedProxies: ps}
	for _, tc := range []struct {
		peer string
		xff  []string
		want string
	}{
		{"203.0.113.9:5000", []string{"198.51.100.1"}, "203.0.113.9"}, // untrusted peer: its header is ignored
		{"10.0.0.1:5000", nil, "10.0.0.1"},
		{"10.0.0.1:5000", []string{"198.51.100.1"}, "198.51.100.1"},
		{"10.0.0.1:5000", []string{"6.6.6.6, 198.51.100.1"}, "198.51.100.1"},       // the client's own entry is left of the proxy's
		{"10.0.0.1:5000", []string{"198.51.100.1, 192.168.4.4"}, "198.51.100.1"},   // a chain of trusted proxies
		{"10.0.0.1:5000", []string{"198.51.100.1", "192.168.4.4"}, "198.51.100.1"}, // several headers
		{"[fd00::1]:5000", []string{"2001:db8::7"}, "2001:db8::7"},                 // IPv6
		{"10.0.0.1:5000", []string{"garbage, 192.168.4.4"}, "192.168.4.4"},         // unparsable: stop at the last trusted hop
		{"[::ffff:10.0.0.1]:5000", []string{"198.51.100.1"}, "198.51.100.1"},       // v4-mapped peer
	} {
		if got := c.ClientAddr(tc.peer, tc.xff); got != netip.MustParseAddr(tc.want) {
			t.Errorf("ClientAddr(%s, %q) = %s, want %s", tc.peer, tc.xff, got, tc.want)
		}
	}
	if _, err := config.ParseTrustedProxies("10.0.0.1,nonsense"); err == nil {
		t.Error("a bad PAPERCLIP_TRUSTED_PROXIES entry was accepted")
	}
	env := map[string]string{"PAPERCLIP_HOME": t.TempDir(), "PAPERCLIP_TRUSTED_PROXIES": "127.0.0.1"}
	cfg, err := config.Load(config.Flags{}, func(k string) string { return env[k] })
	if err != nil || len(cfg.TrustedProxies) != 1 || cfg.TrustedProxies[0] != netip.MustParsePrefix("127.0.0.1/32") {
		t.Fatalf("Load: %v %v", cfg.TrustedProxies, err)
	}
}
