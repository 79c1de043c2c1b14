// Package sandbox runs agent processes of sandbox environments under
// bubblewrap and bridges their API calls to the control plane.
//
// A sandboxed process sees a read-only operating system, a private /tmp,
// /proc and /dev, its task directory (read-write; its cwd and HOME), its
// run's skills directory (read-only), the server's own binary as
// paperclipai and, when an instance administrator approved a command that
// lives outside the system paths, the directory of its executable
// (read-only). It has no network, no view of other
// processes and no capabilities, and never runs as host uid 0: a server
// running as root starts bubblewrap as an unprivileged Identity. Nothing
// else of the host, in particular not the Paperclip home (database, vault
// key, other tasks), is mounted. The only way back to the control plane is
// a unix socket served by a Bridge, which allows a fixed set of task and
// email operations on the run's own task.
package sandbox

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// ErrNoBwrap means bubblewrap is not installed on this host.
var ErrNoBwrap = errors.New("bubblewrap (bwrap) is required for sandbox environments")

// ErrCommandNotApproved means the command of a configuration no instance
// administrator approved lies outside the system directories and the task
// directory, so running it would expose a host directory of the
// configuring member's choosing.
var ErrCommandNotApproved = errors.New("sandbox: command outside the system directories needs an instance administrator's approval")

// Paths inside the sandbox. They live on bwrap's private root, not in the
// task directory, so the agent cannot replace them on the host.
const (
	// ControlDir holds what the control plane provides to the run.
	ControlDir = "/run/paperclip"
	// SocketPath is where the API bridge socket is mounted.
	SocketPath = ControlDir + "/api.sock"
	// SkillsDir is where the run's skills directory is mounted.
	SkillsDir = ControlDir + "/skills"
	// BinDir holds the server's own executable as "paperclipai"; it is
	// first on a sandboxed run's PATH.
	BinDir = ControlDir + "/bin"
)

// minVersion is the oldest bubblewrap with everything Command relies on:
// --disable-userns (0.8.0).
var minVersion = [3]int{0, 8, 0}

var versionCache sync.Map // bwrap path -> error

// checkVersion refuses a bubblewrap older than minVersion (once per path).
func checkVersion(bwrap string) error {
	if v, ok := versionCache.Load(bwrap); ok {
		err, _ := v.(error)
		return err
	}
	out, err := exec.Command(bwrap, "--version").Output()
	if err == nil {
		err = compareVersion(strings.TrimSpace(string(out)))
	} else {
		err = fmt.Errorf("sandbox: run %s --version: %w", bwrap, err)
	}
	versionCache.Store(bwrap, err)
	return err
}

// compareVersion checks a "bubblewrap X.Y.Z" version line.
func compareVersion(line string) error {
	f := strings.Fields(line)
	if len(f) == 0 {
		return fmt.Errorf("sandbox: unrecognised bubblewrap version %q", line)
	}
	parts := strings.SplitN(f[len(f)-1], ".", 3)
	var got [3]int
	for i, p := range parts {
		n, err := strconv.Atoi(strings.TrimLeftFunc(p, func(r rune) bool { return r < '0' || r > '9' }))
		if err != nil {
			return fmt.Errorf("sandbox: unrecognised bubblewrap version %q", line)
		}
		got[i] = n
	}
	for i := range got {
		if got[i] != minVersion[i] {
			if got[i] < minVersion[i] {
				return fmt.Errorf("sandbox: bubblewrap %d.%d.%d or newer is required (found %q)", minVersion[0], minVersion[1], minVersion[2], line)
			}
			return nil
		}
	}
	return nil
}

// APIURL is the PAPERCLIP_API_URL of a sandboxed run with a bridge.
const APIURL = "unix:" + SocketPath

// systemDirs are mounted read-only (or recreated as symlinks on merged-/usr
// systems). /opt, /home, /root, /srv, /var and /mnt are deliberately absent:
// they hold other users' and services' data.
var systemDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}

// etcEntries is the part of /etc that ordinary tools need. The whole of /etc
// is not exposed: it holds host secrets (shadow, SSH host keys, service
// configuration that may name credentials).
var etcEntries = []string{
	"/etc/alternatives", "/etc/ca-certificates", "/etc/ssl", "/etc/pki", "/etc/crypto-policies",
	"/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime", "/etc/timezone",
	"/etc/passwd", "/etc/group", "/etc/nsswitch.conf", "/etc/hosts", "/etc/mime.types",
	"/etc/gitconfig", "/etc/profile", "/etc/bash.bashrc", "/etc/inputrc", "/etc/magic",
}

// Spec describes one sandboxed process.
type Spec struct {
	// Workdir is the task directory: bound read-write at the same path and
	// used as HOME. When the identity switches, it must belong to it.
	Workdir string
	// Cwd is the working directory (Workdir or inside it; default Workdir).
	Cwd string
	// SkillsDir, when set, is bound read-only at SkillsDir.
	SkillsDir string
	// Socket, when set, is the host path of the bridge socket, bound at
	// SocketPath.
	Socket string
	// Binary, when set, is the host path of the server's own executable,
	// bound read-only at BinDir/paperclipai.
	Binary string
	// Command is the executable to run (absolute, or found on the
	// server's PATH) and Args its arguments.
	Command string
	Args    []string
	// CommandApproved is set when an instance administrator wrote the
	// command (the agent's hostExecutionApproved). Only then may it live
	// outside the system directories, its directory being bound
	// read-only. Otherwise the command must be a system program (under
	// /usr, /bin, /sbin or /lib*) or lie in the task directory, and Command
	// fails with ErrCommandNotApproved: a server running as root stages
	// binds whatever the directory permissions say, so a member choosing
	// the command would choose which host directory (a shared /tmp with
	// other services' sockets, an application's secrets) the sandbox sees.
	CommandApproved bool
	// Env is the complete environment of the sandboxed process. It reaches
	// the process through bubblewrap's --setenv, never through
	// bubblewrap's own environment (where LD_PRELOAD and friends would act
	// on bubblewrap itself, outside the sandbox) nor its command line
	// (which every host user can read).
	Env map[string]string
	// Hidden are host paths (the Paperclip home's workspaces and instance
	// directories, the master key) whose contents must stay invisible
	// except for the explicit binds above. A bind that would expose any of
	// them is refused.
	Hidden []string
	// User is the identity bubblewrap runs as.
	User Identity
	// ReadOnlyDirs are further host directories bound read-only at their
	// own path (a CLI agent's install directory, an instance
	// administrator's setting), checked like an approved command's
	// directory.
	ReadOnlyDirs []string
	// Binds are further binds of the run's own files, applied after the
	// task directory (so a destination may lie inside it). See Bind.
	Binds []Bind
}

// LookBwrap returns the path of the bwrap executable or ErrNoBwrap.
func LookBwrap() (string, error) {
	p, err := exec.LookPath("bwrap")
	if err != nil {
		return "", ErrNoBwrap
	}
	return p, nil
}

// mount is one private bind of a host path. A server switching identity
// stages it first (see Cmd.Start): the sandbox user may not be able to
// traverse the directories around the source.
type mount struct {
	src, dest string
	dir, rw   bool
}

// plan validates s and returns bubblewrap's options (without the private
// mounts and --chdir), the private mounts and the resolved command.
func plan(s Spec) ([]string, []mount, string, error) {
	if !filepath.IsAbs(s.Workdir) {
		return nil, nil, "", errors.New("sandbox: task directory must be an absolute path")
	}
	cmdPath := s.Command
	// The server's own binary, already bound at BinDir, runs as itself
	// (`paperclipai egress-exec` wraps CLI agents).
	if s.Binary == "" || s.Command != BinDir+"/paperclipai" {
		var err error
		if cmdPath, err = resolveCommand(s.Command); err != nil {
			return nil, nil, "", err
		}
	}
	workdir := filepath.Clean(s.Workdir)
	// The task directory is writable by the agent: it must not contain (be
	// an ancestor of) anything the agent must not see, and must not sit in
	// the read-only system tree, which would mask it or be masked by it.
	for _, h := range s.Hidden {
		if h != "" && within(filepath.Clean(h), workdir) {
			return nil, nil, "", errors.New("sandbox: task directory would expose the Paperclip home")
		}
	}
	if underSystem(workdir) {
		return nil, nil, "", errors.New("sandbox: task directory must not be inside a read-only system directory")
	}
	if s.Cwd != "" && !within(filepath.Clean(s.Cwd), workdir) {
		return nil, nil, "", errors.New("sandbox: working directory must be inside the task directory")
	}
	a := []string{
		// No network, PIDs, IPC, UTS or user identity shared with the
		// host, and no further user namespaces inside (they would hand the
		// agent capabilities over its own namespaces: kernel attack surface).
		"--unshare-all", "--unshare-user", "--disable-userns",
		// No capabilities at all, even where bubblewrap would keep some.
		"--cap-drop", "ALL",
		// The sandbox dies with the server's child process, so a killed or
		// timed-out run leaves nothing running.
		"--die-with-parent",
		// A new session: the agent cannot inject input into the server's
		// terminal (TIOCSTI).
		"--new-session",
		// A fresh /proc of the sandbox's PID namespace; bubblewrap mounts
		// /proc/sys read-only over it (and sysrq-trigger is absent).
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
	a = append(a, "--clearenv")
	keys := make([]string, 0, len(s.Env))
	for k := range s.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.Contains(s.Env[k], "\x00") {
			return nil, nil, "", fmt.Errorf("sandbox: invalid environment variable %q", k)
		}
		a = append(a, "--setenv", k, s.Env[k])
	}
	var mounts []mount
	if s.SkillsDir != "" {
		mounts = append(mounts, mount{src: s.SkillsDir, dest: SkillsDir, dir: true})
	}
	if s.Socket != "" {
		mounts = append(mounts, mount{src: s.Socket, dest: SocketPath, rw: true})
	}
	if s.Binary != "" {
		bin, err := filepath.EvalSymlinks(s.Binary)
		if err != nil {
			return nil, nil, "", fmt.Errorf("sandbox: find the paperclipai binary: %w", err)
		}
		mounts = append(mounts, mount{src: bin, dest: BinDir + "/paperclipai"})
	}
	cmdDir := filepath.Dir(cmdPath)
	if !s.CommandApproved && !underSystem(cmdDir) && !within(cmdDir, workdir) && !within(cmdPath, ControlDir) {
		return nil, nil, "", fmt.Errorf("%w: %s is neither a system program (%s) nor in the task directory; "+
			"install it under /usr/local/bin, or have an instance administrator save the agent's configuration",
			ErrCommandNotApproved, cmdPath, strings.Join(systemDirs, ", "))
	}
	roDirs := []string{cmdDir}
	for _, d := range s.ReadOnlyDirs {
		if !filepath.IsAbs(d) {
			return nil, nil, "", fmt.Errorf("sandbox: read-only directory %q must be an absolute path", d)
		}
		roDirs = append(roDirs, filepath.Clean(d))
	}
	for i, dir := range roDirs {
		if underSystem(dir) || within(dir, workdir) || within(dir, ControlDir) || slices.Contains(roDirs[:i], dir) {
			continue
		}
		// The directory is exposed read-only, so it must not contain or
		// sit inside anything hidden, nor contain the task dir.
		if within(workdir, dir) {
			return nil, nil, "", fmt.Errorf("sandbox: %s contains the task directory; install the agent command elsewhere", dir)
		}
		for _, h := range s.Hidden {
			if h != "" && (within(filepath.Clean(h), dir) || within(dir, filepath.Clean(h))) {
				return nil, nil, "", fmt.Errorf("sandbox: %s overlaps the Paperclip home; install the agent command elsewhere", dir)
			}
		}
		mounts = append(mounts, mount{src: dir, dest: dir, dir: true})
	}
	mounts = append(mounts, mount{src: workdir, dest: workdir, dir: true, rw: true})
	extra, err := bindMounts(s.Binds, workdir)
	if err != nil {
		return nil, nil, "", err
	}
	return a, append(mounts, extra...), cmdPath, nil
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

// SystemPath reports whether the clean absolute path p lies in a system
// directory every sandbox sees read-only (/usr, /bin, /sbin, /lib*, /etc).
func SystemPath(p string) bool { return underSystem(p) }

func underSystem(p string) bool {
	for _, d := range systemDirs {
		if within(p, d) {
			return true
		}
	}
	return within(p, "/etc")
}

// Within reports whether the clean path p is dir or inside it.
func Within(p, dir string) bool { return within(p, dir) }

// within reports whether p is dir or inside it.
func within(p, dir string) bool {
	if p == dir || dir == "/" {
		return true
	}
	return strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}
