package sandbox_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paperclipai/paperclipai/internal/sandbox"
)

// echoServer accepts TCP connections and echoes what it reads.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	return ln.Addr().String()
}

// connect sends CONNECT dest over c and returns the status line.
func connect(t *testing.T, c net.Conn, dest string) (string, *bufio.Reader) {
	t.Helper()
	if _, err := io.WriteString(c, "CONNECT "+dest+" HTTP/1.1\r\nHost: "+dest+"\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		return resp.Status + " " + string(b), br
	}
	return resp.Status, br
}

// The egress proxy tunnels only to allowlisted destinations, refuses
// anything but CONNECT, and (with its real dialer) never reaches a
// non-public address; inside the sandbox the forwarder exposes it on
// loopback for HTTPS_PROXY.
func TestEgressProxy(t *testing.T) {
	echo := echoServer(t)
	dir := filepath.Join(t.TempDir(), "egress")
	e, err := sandbox.StartEgress(sandbox.EgressOptions{Dir: dir, Allow: []string{"API.Example.test", "other.test:8443"},
		Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, echo)
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if !e.Allows("api.example.test:443") || e.Allows("api.example.test:80") || !e.Allows("other.test:8443") || e.Allows("evil.test:443") {
		t.Fatal("allowlist matching")
	}
	addr, err := sandbox.ForwardEgress(t.Context(), e.Socket())
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	status, br := connect(t, c, "api.example.test:443")
	if !strings.HasPrefix(status, "200") {
		t.Fatalf("allowed CONNECT: %s", status)
	}
	_, _ = io.WriteString(c, "ping\n")
	if line, _ := br.ReadString('\n'); line != "ping\n" {
		t.Fatalf("tunnel echo: %q", line)
	}
	for _, dest := range []string{"evil.test:443", "api.example.test:80", "169.254.169.254:80"} {
		c2, _ := net.Dial("unix", e.Socket())
		if status, _ := connect(t, c2, dest); !strings.HasPrefix(status, "403") || !strings.Contains(status, "not an allowed destination") {
			t.Fatalf("CONNECT %s: %s", dest, status)
		}
		c2.Close()
	}
	hc := unixClient(e.Socket())
	resp, err := hc.Get("http://api.example.test/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("plain HTTP through the proxy: %d", resp.StatusCode)
	}
	// Close cuts the open tunnel.
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := br.ReadString('\n'); err == nil {
		t.Fatal("the tunnel outlived the proxy")
	}
}

func TestEgressRefusesNonPublicAddresses(t *testing.T) {
	echo := echoServer(t)
	_, port, _ := net.SplitHostPort(echo)
	e, err := sandbox.StartEgress(sandbox.EgressOptions{Dir: filepath.Join(t.TempDir(), "egress"), Allow: []string{"localhost:" + port}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	c, _ := net.Dial("unix", e.Socket())
	defer c.Close()
	if status, _ := connect(t, c, "localhost:"+port); !strings.HasPrefix(status, "502") || !strings.Contains(status, "not a public address") {
		t.Fatalf("an allowlisted name resolving to loopback: %s", status)
	}
	for _, a := range []string{"127.0.0.1", "10.1.2.3", "192.168.1.1", "172.16.0.1", "169.254.169.254", "100.64.0.1", "::1", "fd00::1", "fe80::1", "0.0.0.0", "::ffff:127.0.0.1"} {
		if sandbox.PublicAddr(netip.MustParseAddr(a)) {
			t.Errorf("%s counted as public", a)
		}
	}
	for _, a := range []string{"160.79.104.10", "2607:6bc0::10"} {
		if !sandbox.PublicAddr(netip.MustParseAddr(a)) {
			t.Errorf("%s counted as non-public", a)
		}
	}
	if _, err := sandbox.NormalizeEgress([]string{"a b"}); err == nil {
		t.Fatal("malformed destination accepted")
	}
}
