package sandbox

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// A sandbox never shares the host's network: that would hand the agent
// every loopback service (the control plane itself, where a loopback peer
// may be the local board; databases), the cloud metadata address and the
// local network. A sandbox environment whose operator allows network gets
// an egress proxy instead: an HTTP CONNECT proxy on a unix socket of the
// run, admitting only an allowlist of host:port pairs (the model
// provider's API), and only when they resolve to public addresses. Inside
// the sandbox `paperclipai egress-exec` listens on the sandbox's own
// loopback, forwards to the socket, and starts the CLI with HTTPS_PROXY
// pointing there.

// ErrEgressDenied is returned for a destination outside the allowlist or
// resolving to a non-public address.
var ErrEgressDenied = errors.New("egress denied")

// Egress serves one sandboxed run's egress proxy socket.
type Egress struct {
	dir    string
	socket string
	srv    *http.Server
	done   chan struct{}
	allow  []string
	dial   func(ctx context.Context, network, addr string) (net.Conn, error)
	log    *slog.Logger
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
}

// EgressOptions configure an egress proxy.
type EgressOptions struct {
	// Dir is the run's private egress directory, created 0700 (it must
	// not exist yet), under the hidden runs directory.
	Dir string
	// Owner is the sandbox identity; the socket is given to it.
	Owner Identity
	// Allow lists the admitted destinations as host:port (a bare host
	// means port 443). Hosts are matched exactly, case-insensitively.
	Allow []string
	// Dial connects to an admitted destination; nil uses a dialer that
	// refuses non-public addresses. Tests may point it elsewhere.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	Log  *slog.Logger
}

// NormalizeEgress returns allow entries as lower-case host:port, or an
// error naming a malformed one.
func NormalizeEgress(allow []string) ([]string, error) {
	out := make([]string, 0, len(allow))
	for _, a := range allow {
		a = strings.ToLower(strings.TrimSpace(a))
		host, port, err := net.SplitHostPort(a)
		if err != nil {
			host, port = a, "443"
		}
		if host == "" || strings.ContainsAny(host, "/@ *") || port == "" {
			return nil, fmt.Errorf("sandbox: egress destination %q is not host or host:port", a)
		}
		out = append(out, net.JoinHostPort(host, port))
	}
	return out, nil
}

// StartEgress listens on o.Dir/egress.sock until Close.
func StartEgress(o EgressOptions) (*Egress, error) {
	allow, err := NormalizeEgress(o.Allow)
	if err != nil {
		return nil, err
	}
	if !filepath.IsAbs(o.Dir) {
		return nil, errors.New("sandbox egress: the directory must be an absolute path")
	}
	if err := os.Mkdir(o.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("sandbox egress: %w", err)
	}
	e := &Egress{dir: o.Dir, socket: filepath.Join(o.Dir, "egress.sock"), done: make(chan struct{}), allow: allow,
		dial: o.Dial, log: o.Log, conns: map[net.Conn]struct{}{}}
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	if e.dial == nil {
		e.dial = publicDialer().DialContext
	}
	ln, err := listenIn(o.Dir, "egress.sock", o.Owner)
	if err != nil {
		_ = os.RemoveAll(o.Dir)
		return nil, err
	}
	e.srv = &http.Server{Handler: http.HandlerFunc(e.serve), ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(e.log.Handler(), slog.LevelWarn)}
	go func() {
		defer close(e.done)
		if err := e.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			e.log.Warn("sandbox egress stopped", "err", err)
		}
	}()
	return e, nil
}

// Socket is the host path of the egress socket (bind it at EgressSocket).
func (e *Egress) Socket() string { return e.socket }

// Close stops the proxy, cuts open tunnels and removes the socket directory.
func (e *Egress) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := e.srv.Shutdown(ctx)
	e.mu.Lock()
	e.closed = true
	for c := range e.conns {
		_ = c.Close()
	}
	e.mu.Unlock()
	e.wg.Wait()
	<-e.done
	return errors.Join(err, os.RemoveAll(e.dir))
}

func (e *Egress) track(c net.Conn) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return false
	}
	e.conns[c] = struct{}{}
	return true
}

func (e *Egress) untrack(c net.Conn) {
	e.mu.Lock()
	delete(e.conns, c)
	e.mu.Unlock()
	_ = c.Close()
}

// Allows reports whether a CONNECT to hostport is admitted.
func (e *Egress) Allows(hostport string) bool {
	host, port, err := net.SplitHostPort(strings.ToLower(hostport))
	return err == nil && slices.Contains(e.allow, net.JoinHostPort(host, port))
}

func (e *Egress) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodConnect {
		http.Error(w, "the sandbox egress proxy only tunnels HTTPS (CONNECT)", http.StatusMethodNotAllowed)
		return
	}
	if !e.Allows(r.Host) {
		e.log.Warn("sandbox egress refused", "destination", r.Host)
		http.Error(w, fmt.Sprintf("%v: %s is not an allowed destination of this sandbox (allowed: %s)", ErrEgressDenied, r.Host,
			strings.Join(e.allow, ", ")), http.StatusForbidden)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	up, err := e.dial(ctx, "tcp", r.Host)
	cancel()
	if err != nil {
		http.Error(w, "sandbox egress: "+err.Error(), http.StatusBadGateway)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		up.Close()
		http.Error(w, "sandbox egress: cannot tunnel", http.StatusInternalServerError)
		return
	}
	down, rw, err := hj.Hijack()
	if err != nil {
		up.Close()
		return
	}
	if !e.track(up) || !e.track(down) {
		up.Close()
		down.Close()
		return
	}
	_, _ = rw.WriteString("HTTP/1.1 200 Connection established\r\n\r\n")
	if err := rw.Flush(); err != nil {
		e.untrack(up)
		e.untrack(down)
		return
	}
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		splice(up, down, rw.Reader)
		e.untrack(up)
		e.untrack(down)
	}()
}

// splice copies both ways until either side ends; buffered holds bytes the
// client sent after its CONNECT request.
func splice(up, down net.Conn, buffered *bufio.Reader) {
	done := make(chan struct{}, 2)
	go func() {
		_, _ = io.Copy(up, buffered)
		closeWrite(up)
		done <- struct{}{}
	}()
	go func() {
		_, _ = io.Copy(down, up)
		closeWrite(down)
		done <- struct{}{}
	}()
	<-done
	<-done
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		return
	}
	_ = c.Close()
}

// publicDialer refuses to connect to loopback, private, link-local,
// shared (CGNAT), multicast and unspecified addresses, checked on the
// address actually dialled (so DNS rebinding cannot reach the host).
func publicDialer() *net.Dialer {
	return &net.Dialer{Timeout: 30 * time.Second, Control: func(_, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return fmt.Errorf("%w: unparsable address %s", ErrEgressDenied, address)
		}
		if !PublicAddr(ap.Addr()) {
			return fmt.Errorf("%w: %s is not a public address", ErrEgressDenied, ap.Addr())
		}
		return nil
	}}
}

var sharedSpace = netip.MustParsePrefix("100.64.0.0/10")

// PublicAddr reports whether a is a globally routable unicast address.
func PublicAddr(a netip.Addr) bool {
	a = a.Unmap()
	return a.IsValid() && a.IsGlobalUnicast() && !a.IsPrivate() && !a.IsLoopback() && !a.IsLinkLocalUnicast() &&
		!sharedSpace.Contains(a)
}

// ForwardEgress listens on the sandbox's own loopback and forwards every
// connection to the egress socket; it returns the listening address
// (for HTTPS_PROXY) and stops when ctx ends.
func ForwardEgress(ctx context.Context, socket string) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("egress forwarder: %w", err)
	}
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				var d net.Dialer
				up, err := d.DialContext(ctx, "unix", socket)
				if err != nil {
					return
				}
				defer up.Close()
				splice(up, c, bufio.NewReader(c))
			}()
		}
	}()
	return ln.Addr().String(), nil
}
