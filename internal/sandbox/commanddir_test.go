package sandbox_test

import (
	"bytes"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paperclipai/paperclipai/internal/sandbox"
	"github.com/paperclipai/paperclipai/internal/testkit"
)

// TestUnapprovedCommandDirectoryNotBound is the "sandbox exposes a
// directory the member chooses" regression: a command no instance
// administrator approved must be a system program (or lie in the task
// directory). Pointing it at a program in a 0700 root directory next to a
// service's secrets and socket is refused, so a root server's staging
// (which ignores directory permissions) never binds that directory; a
// system program cannot see the directory either. An administrator's
// approved command still gets its directory bound.
func TestUnapprovedCommandDirectoryNotBound(t *testing.T) {
	testkit.RequireBwrap(t)
	id, err := sandbox.HostIdentity()
	if err != nil {
		t.Fatal(err)
	}
	bwrap, _ := sandbox.LookBwrap()
	// A directory like /srv/app or a shared /tmp: a program, a secret
	// and a service's socket. t.TempDir is 0700 and, as root, root's.
	app := t.TempDir()
	tool := filepath.Join(app, "agent.sh")
	if err := os.WriteFile(tool, []byte("#!/bin/sh\necho approved-ran\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(app, "neighbour.env"), []byte("SECRET=canary-neighbour"), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", filepath.Join(app, "svc.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	workdir := filepath.Join(t.TempDir(), "task")
	if err := os.Mkdir(workdir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := id.Own(workdir); err != nil {
		t.Fatal(err)
	}
	run := func(s sandbox.Spec) string {
		t.Helper()
		s.Workdir, s.User = workdir, id
		s.Env = map[string]string{"PATH": "/usr/bin:/bin", "APP": app}
		cmd, err := sandbox.Command(bwrap, s)
		if err != nil {
			t.Fatalf("%s: %v", s.Command, err)
		}
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Wait(); err != nil {
			t.Fatalf("%s: %v\n%s", s.Command, err, out.String())
		}
		return out.String()
	}

	for _, command := range []string{tool, filepath.Join(app, "..", filepath.Base(app), "agent.sh")} {
		_, err := sandbox.Command(bwrap, sandbox.Spec{Workdir: workdir, User: id, Command: command})
		if !errors.Is(err, sandbox.ErrCommandNotApproved) || !strings.Contains(err.Error(), tool) ||
			!strings.Contains(err.Error(), "instance administrator") {
			t.Fatalf("unapproved command %s: %v", command, err)
		}
	}
	// A symlink in a system-looking place does not help: the check is on
	// the resolved program, and a link the agent puts in its task
	// directory resolves to the application directory.
	link := filepath.Join(workdir, "agent")
	if err := os.Symlink(tool, link); err != nil {
		t.Fatal(err)
	}
	if _, err := sandbox.Command(bwrap, sandbox.Spec{Workdir: workdir, User: id, Command: link}); !errors.Is(err, sandbox.ErrCommandNotApproved) {
		t.Fatalf("symlink to the application directory: %v", err)
	}
	_ = os.Remove(link)

	// A system program of an unapproved configuration runs, and the
	// application directory does not exist in its sandbox.
	out := run(sandbox.Spec{Command: "/bin/sh", Args: []string{"-c",
		`ls -a "$APP" 2>&1; cat "$APP/neighbour.env" 2>&1; [ -S "$APP/svc.sock" ] && echo SOCKET-VISIBLE; echo probe-done`}})
	if !strings.Contains(out, "probe-done") || strings.Contains(out, "canary-neighbour") || strings.Contains(out, "SOCKET-VISIBLE") ||
		strings.Contains(out, "agent.sh") {
		t.Fatalf("system program saw the application directory:\n%s", out)
	}
	// A program in the task directory (already the agent's) runs as well.
	own := filepath.Join(workdir, "own.sh")
	if err := os.WriteFile(own, []byte("#!/bin/sh\necho own-ran\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := id.Own(own); err != nil {
		t.Fatal(err)
	}
	if out := run(sandbox.Spec{Command: own}); !strings.Contains(out, "own-ran") {
		t.Fatalf("task directory program: %s", out)
	}
	// An administrator's approved command keeps its directory (read-only).
	if out := run(sandbox.Spec{Command: tool, CommandApproved: true}); !strings.Contains(out, "approved-ran") {
		t.Fatalf("approved command: %s", out)
	}
}
