// Package sandbox runs agent processes of sandbox environments under
// bubblewrap and bridges their API calls to the control plane.
//
// A sandboxed process sees a read-only operating system, a private /tmp,
// /proc and /dev, its task directory (read-write; its cwd and HOME), its
// run's skills directory (read-only) and, when it lives outside the system
// paths, the directory of its executable (read-only). It has no network and
// no view of other processes. Nothing else of the host, in particular not
// the Paperclip home (database, vault key, other tasks), is mounted. The
// only way back to the control plane is a unix socket served by a Bridge,
// which allows a fixed set of task and email operations.
package sandbox

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// ErrNoBwrap means bubblewrap is not installed on this host.
var ErrNoBwrap = errors.New("bubblewrap (bwrap) is required for sandbox environments")

// Paths inside the sandbox. They live on bwrap's private root, not in the
// task directory, so the agent cannot replace them on the host.
const (
	// ControlDir holds what the control plane provides to the run.
	ControlDir = "/run/paperclip"
	// SocketPath is where the API bridge socket is mounted.
	SocketPath = ControlDir + "/api.sock"
	// SkillsDir is where the run's skills directory is mounted.
	SkillsDir = ControlDir + "/skills"
)

// APIURL is the PAPERCLIP_API_URL of a sandboxed run with a bridge.
const APIURL = "unix:" + SocketPath

// systemDirs are mounted read-only (or recreated as symlinks on merged-/usr
// systems). /opt, /home, /root, /srv, /var and /mnt are deliberately absent:
// they hold other users' and services' data.
var systemDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}

// etcEntries is the part of /etc that ordinary tools need. The whole of /etc
// is not exposed: it holds host secrets (shadow, SSH host keys, service
// configuration that may name credentials), and a sandbox runs as the
// server's user, which may be root.
var etcEntries = []string{
	"/etc/alternatives", "/etc/ca-certificates", "/etc/ssl", "/etc/pki", "/etc/crypto-policies",
	"/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime", "/etc/timezone",
	"/etc/passwd", "/etc/group", "/etc/nsswitch.conf", "/etc/hosts", "/etc/mime.types",
	"/etc/gitconfig", "/etc/profile", "/etc/bash.bashrc", "/etc/inputrc", "/etc/magic",
}

// Spec describes one sandboxed process.
type Spec struct {
	// Workdir is the task directory: bound read-write at the same path and
	// used as HOME.
	Workdir string
	// Cwd is the working directory (Workdir or inside it; default Workdir).
	Cwd string
	// SkillsDir, when set, is bound read-only at SkillsDir.
	SkillsDir string
	// Socket, when set, is the host path of the bridge socket, bound at
	// SocketPath.
	Socket string
	// Command is the executable to run (absolute, or found on PATH) and
	// Args its arguments.
	Command string
	Args    []string
	// Hidden are host paths (the Paperclip home's workspaces and instance
	// directories) whose contents must stay invisible except for the
	// explicit binds above. A bind that would expose any of them is refused.
	Hidden []string
}

// LookBwrap returns the path of the bwrap executable or ErrNoBwrap.
func LookBwrap() (string, error) {
	p, err := exec.LookPath("bwrap")
	if err != nil {
		return "", ErrNoBwrap
	}
	return p, nil
}

// Args returns bwrap's arguments for s, ending with the command and its
// arguments. It refuses specs whose binds would expose hidden host paths.
func Args(s Spec) ([]string, error) {
	if !filepath.IsAbs(s.Workdir) {
		return nil, errors.New("sandbox: task directory must be an absolute path")
	}
	cmdPath, err := resolveCommand(s.Command)
	if err != nil {
		return nil, err
	}
	workdir := filepath.Clean(s.Workdir)
	// The task directory is writable by the agent: it must not contain (be
	// an ancestor of) anything the agent must not see, and must not sit in
	// the read-only system tree, which would mask it or be masked by it.
	for _, h := range s.Hidden {
		if h != "" && within(filepath.Clean(h), workdir) {
			return nil, errors.New("sandbox: task directory would expose the Paperclip home")
		}
	}
	if underSystem(workdir) {
		return nil, errors.New("sandbox: task directory must not be inside a read-only system directory")
	}
	a := []string{
		// No network, PIDs, IPC, UTS or user identity shared with the host.
		"--unshare-all",
		// The sandbox dies with the server's child process, so a killed or
		// timed-out run leaves nothing running.
		"--die-with-parent",
		// A new session: the agent cannot inject input into the server's
		// terminal (TIOCSTI).
		"--new-session",
		"--proc", "/proc",
		"--dev", "/dev",
		"--tmpfs", "/tmp",
		"--tmpfs", "/run",
	}
	for _, d := range systemDirs {
		a = appendSystem(a, d)
	}
	for _, e := range etcEntries {
		a = append(a, "--ro-bind-try", e, e)
	}
	if s.SkillsDir != "" {
		a = append(a, "--ro-bind", s.SkillsDir, SkillsDir)
	}
	if s.Socket != "" {
		a = append(a, "--bind", s.Socket, SocketPath)
	}
	if dir := filepath.Dir(cmdPath); !underSystem(dir) && !within(dir, workdir) {
		// The executable's directory is exposed read-only, so it must not
		// contain or sit inside anything hidden, nor contain the task dir.
		if within(workdir, dir) {
			return nil, errors.New("sandbox: the command's directory contains the task directory; install the agent command elsewhere")
		}
		for _, h := range s.Hidden {
			if h != "" && (within(filepath.Clean(h), dir) || within(dir, filepath.Clean(h))) {
				return nil, errors.New("sandbox: the command's directory overlaps the Paperclip home; install the agent command elsewhere")
			}
		}
		a = append(a, "--ro-bind", dir, dir)
	}
	cwd := workdir
	if s.Cwd != "" {
		cwd = filepath.Clean(s.Cwd)
		if !within(cwd, workdir) {
			return nil, errors.New("sandbox: working directory must be inside the task directory")
		}
	}
	a = append(a, "--bind", workdir, workdir, "--chdir", cwd, "--", cmdPath)
	return append(a, s.Args...), nil
}

// resolveCommand makes the command absolute (resolving symlinks, so the
// directory bound is the one holding the real file).
func resolveCommand(cmd string) (string, error) {
	if cmd == "" {
		return "", errors.New("sandbox: command is required")
	}
	p, err := exec.LookPath(cmd)
	if err != nil {
		return "", fmt.Errorf("sandbox: find command: %w", err)
	}
	if p, err = filepath.Abs(p); err != nil {
		return "", fmt.Errorf("sandbox: find command: %w", err)
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", fmt.Errorf("sandbox: find command: %w", err)
	}
	if underSystem(filepath.Dir(p)) {
		// Keep the invoked name (busybox-style multi-call binaries and
		// /etc/alternatives links depend on it); it resolves inside the sandbox.
		return p, nil
	}
	return real, nil
}

// appendSystem mounts a system directory read-only, or recreates it as the
// same relative symlink on merged-/usr systems (/bin -> usr/bin).
func appendSystem(a []string, d string) []string {
	fi, err := os.Lstat(d)
	switch {
	case err != nil:
		return a
	case fi.Mode()&os.ModeSymlink != 0:
		target, err := os.Readlink(d)
		if err != nil {
			return a
		}
		return append(a, "--symlink", target, d)
	default:
		return append(a, "--ro-bind", d, d)
	}
}

func underSystem(p string) bool {
	for _, d := range systemDirs {
		if within(p, d) {
			return true
		}
	}
	return within(p, "/etc")
}

// within reports whether p is dir or inside it.
func within(p, dir string) bool {
	if p == dir || dir == "/" {
		return true
	}
	return strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}
