// Package netguard keeps server-side HTTP requests whose destination
// someone else chose (provider download links, agents' http adapter URLs)
// away from private networks: loopback, RFC 1918, link-local (cloud
// metadata), CGNAT and reserved ranges. The check is made on the address
// actually dialled, which also defeats DNS rebinding. It is a leaf package.
package netguard

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"syscall"
	"time"
)

// ErrBlocked is the dial error for a destination that is not public.
var ErrBlocked = errors.New("destination address not allowed")

// PublicAddr reports whether a is a public destination: a global unicast
// address outside private, shared (CGNAT), link-local, loopback,
// documentation and reserved ranges. Loopback is accepted when
// allowLoopback is set.
func PublicAddr(a netip.Addr, allowLoopback bool) bool {
	a = a.Unmap()
	if a.IsLoopback() {
		return allowLoopback
	}
	if !a.IsGlobalUnicast() || a.IsPrivate() || a.IsLinkLocalUnicast() {
		return false
	}
	for _, p := range nonPublicPrefixes {
		if p.Contains(a) {
			return false
		}
	}
	return true
}

var nonPublicPrefixes = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("192.0.2.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("198.51.100.0/24"),
	netip.MustParsePrefix("203.0.113.0/24"),
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("64:ff9b::/96"),
	netip.MustParsePrefix("2001:db8::/32"),
}

// IsLoopbackHost reports whether host (without port or brackets) is
// "localhost" or a loopback IP literal (127.0.0.0/8, ::1, or the
// IPv4-mapped form of either).
func IsLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return false
	}
	return a.WithZone("").Unmap().IsLoopback()
}

// PublicHost reports whether every address host (a name or an IP literal,
// without port) resolves to is public. Names under .localhost and names
// that do not resolve are not public; the dial-time check of Transport
// remains the real guard.
func PublicHost(ctx context.Context, host string) bool {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if host == "" || host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return false
	}
	if a, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		return PublicAddr(a, false)
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil || len(addrs) == 0 {
		return false
	}
	for _, a := range addrs {
		if !PublicAddr(a, false) {
			return false
		}
	}
	return true
}

// Dialer returns a dialer that refuses connections to non-public
// addresses (loopback too, unless allowLoopback).
func Dialer(allowLoopback bool) *net.Dialer {
	return &net.Dialer{
		Timeout: 10 * time.Second,
		Control: func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil || !PublicAddr(ap.Addr(), allowLoopback) {
				return ErrBlocked
			}
			return nil
		},
	}
}

// Transport returns an HTTP transport that dials only public addresses
// (see Dialer) and never uses a proxy: a proxy would connect on our behalf
// and bypass the check, and would receive whatever the request carries.
func Transport(allowLoopback bool) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil
	t.DialContext = Dialer(allowLoopback).DialContext
	return t
}
