// Package sdnotify sends service state notifications to systemd (the
// sd_notify protocol): one datagram of newline-separated VAR=value
// assignments to the unix socket named by NOTIFY_SOCKET.
//
// Why our own: coreos/go-systemd is not among the modules our proxy serves,
// and the protocol a Type=notify service needs is this one datagram
// (sd_notify(3), "NOTIFY_SOCKET"); file-descriptor passing and the rest
// of go-systemd are not used.
package sdnotify

import (
	"fmt"
	"net"
	"strings"
)

// States the server sends (sd_notify(3)).
const (
	// Ready says start-up is finished: migrations applied, listeners bound.
	Ready = "READY=1"
	// Stopping says the service is shutting down (draining).
	Stopping = "STOPPING=1"
	// Watchdog keeps the WatchdogSec timer from firing.
	Watchdog = "WATCHDOG=1"
)

// Status is a free-form status line systemctl status shows.
func Status(s string) string { return "STATUS=" + strings.ReplaceAll(s, "\n", " ") }

// Send writes states as one datagram to socket. An empty socket (not
// started by systemd, or a unit that is not Type=notify) is a no-op. A
// socket name starting with "@" is in the abstract namespace, which Go's
// net package maps for us.
func Send(socket string, states ...string) error {
	if socket == "" || len(states) == 0 {
		return nil
	}
	conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: socket, Net: "unixgram"})
	if err != nil {
		return fmt.Errorf("sd_notify: %w", err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte(strings.Join(states, "\n"))); err != nil {
		return fmt.Errorf("sd_notify: %w", err)
	}
	return nil
}
