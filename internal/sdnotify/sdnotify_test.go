package sdnotify_test

import (
	"net"
	"path/filepath"
	"testing"

	"github.com/paperclipai/paperclipai/internal/sdnotify"
)

func TestSendWritesOneDatagram(t *testing.T) {
	path := filepath.Join(t.TempDir(), "notify.sock")
	ln, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if err := sdnotify.Send(path, sdnotify.Ready, sdnotify.Status("serving\non 127.0.0.1:3100")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	n, err := ln.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(buf[:n]), "READY=1\nSTATUS=serving on 127.0.0.1:3100"; got != want {
		t.Fatalf("datagram %q, want %q", got, want)
	}
	if err := sdnotify.Send("", sdnotify.Ready); err != nil {
		t.Fatalf("no socket must be a no-op: %v", err)
	}
	if err := sdnotify.Send(filepath.Join(t.TempDir(), "missing.sock"), sdnotify.Ready); err == nil {
		t.Fatal("a missing socket must be an error")
	}
}
