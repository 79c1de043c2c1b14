package sandbox

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// stageRoot is where a server switching identity stages the private bind
// sources, in a mount namespace of its own (see Cmd.Start). bubblewrap
// does not use the host's /run (its own root is built on /tmp), and the
// sandbox gets a fresh /run.
const stageRoot = "/run"

// Cmd is a prepared sandboxed command. Set output and process attributes
// on the embedded exec.Cmd (keeping Env, Dir, ExtraFiles and
// SysProcAttr.Credential), then call Cmd.Start and Cmd.Wait (not those of
// exec.Cmd).
type Cmd struct {
	*exec.Cmd
	opts   []string
	mounts []mount
	user   Identity
	// exited releases the thread that started a staged bubblewrap.
	exited chan struct{}
}

// Command returns the bubblewrap command for s.
func Command(bwrap string, s Spec) (*Cmd, error) {
	if err := checkVersion(bwrap); err != nil {
		return nil, err
	}
	opts, mounts, cmdPath, err := plan(s)
	if err != nil {
		return nil, err
	}
	for i, m := range mounts {
		src := m.src
		if s.User.Switch {
			src = stagePath(i)
		}
		flag := "--ro-bind"
		if m.rw {
			flag = "--bind"
		}
		opts = append(opts, flag, src, m.dest)
	}
	cwd := filepath.Clean(s.Workdir)
	if s.Cwd != "" {
		cwd = filepath.Clean(s.Cwd)
	}
	// The sandbox's own root (a tmpfs holding the mount points) is made
	// read-only last: only the task directory, /tmp and /run stay writable.
	opts = append(opts, "--remount-ro", "/", "--chdir", cwd)
	// The options, environment values included, travel through descriptor
	// 3 (--args); only the command and its arguments are on the command
	// line.
	cmd := exec.Command(bwrap, append([]string{"--args", "3", "--", cmdPath}, s.Args...)...)
	// bubblewrap itself gets no environment at all, and starts in "/": the
	// server's working directory may not be reachable by the sandbox user.
	cmd.Env = []string{}
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	if s.User.Switch {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(s.User.UID), Gid: uint32(s.User.GID), Groups: []uint32{}}
	}
	return &Cmd{Cmd: cmd, opts: opts, mounts: mounts, user: s.User, exited: make(chan struct{})}, nil
}

func stagePath(i int) string { return stageRoot + "/paperclip-" + strconv.Itoa(i) }

// Start starts bubblewrap. When the identity switches, the private bind
// sources (task directory, skills, bridge socket, binary, command
// directory) usually lie in directories only root may traverse, such as
// the 0700 Paperclip home, and bubblewrap resolves every source path as
// the sandbox user. So bubblewrap starts from a thread that first moves
// into a mount namespace of its own, covers /run with a small tmpfs and
// binds each source there; only bubblewrap inherits that view, and it
// disappears with the sandbox. The host's mounts are never touched.
func (c *Cmd) Start() error {
	f, err := optionsFile(c.opts)
	if err != nil {
		return err
	}
	defer f.Close()
	c.ExtraFiles = append([]*os.File{f}, c.ExtraFiles...)
	if !c.user.Switch {
		return c.Cmd.Start()
	}
	errc := make(chan error, 1)
	go func() {
		// The thread is never unlocked: its mount namespace differs from
		// the rest of the process, so it must end with this goroutine.
		runtime.LockOSThread()
		err := c.startStaged()
		errc <- err
		if err == nil {
			// bubblewrap's --die-with-parent follows the thread that
			// started it: the thread stays until bubblewrap has exited.
			<-c.exited
		}
	}()
	return <-errc
}

// Wait waits for bubblewrap to exit (see exec.Cmd.Wait).
func (c *Cmd) Wait() error {
	err := c.Cmd.Wait()
	select {
	case <-c.exited:
	default:
		close(c.exited)
	}
	return err
}

// startStaged runs on a locked thread: private mount namespace, staged
// sources, then the start of bubblewrap (which inherits the namespace).
func (c *Cmd) startStaged() error {
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("sandbox: private mount namespace: %w", err)
	}
	// Nothing mounted here may propagate back to the host.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("sandbox: private mount namespace: %w", err)
	}
	// The sources are opened inside the new namespace (a bind source must
	// belong to it), before /run is covered.
	fds := make([]int, 0, len(c.mounts))
	defer func() {
		for _, fd := range fds {
			_ = unix.Close(fd)
		}
	}()
	for _, m := range c.mounts {
		flags := unix.O_PATH | unix.O_CLOEXEC | unix.O_NOFOLLOW
		if m.dir {
			flags |= unix.O_DIRECTORY
		}
		fd, err := unix.Open(m.src, flags, 0)
		if err != nil {
			return fmt.Errorf("sandbox: open %s: %w", m.src, err)
		}
		fds = append(fds, fd)
	}
	if err := unix.Mount("paperclip-stage", stageRoot, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=0755,size=64k"); err != nil {
		return fmt.Errorf("sandbox: stage binds: %w", err)
	}
	for i, m := range c.mounts {
		target := stagePath(i)
		if m.dir {
			if err := os.Mkdir(target, 0o755); err != nil {
				return fmt.Errorf("sandbox: stage binds: %w", err)
			}
		} else if err := os.WriteFile(target, nil, 0o644); err != nil {
			return fmt.Errorf("sandbox: stage binds: %w", err)
		}
		// The descriptor's magic link reaches the source whatever the
		// directories around it allow.
		if err := unix.Mount("/proc/self/fd/"+strconv.Itoa(fds[i]), target, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("sandbox: stage %s: %w", m.src, err)
		}
	}
	return c.Cmd.Start()
}

// optionsFile writes bubblewrap options NUL-separated into an anonymous
// memory file, read by bubblewrap through --args and closed by it before
// the sandboxed command starts.
func optionsFile(opts []string) (*os.File, error) {
	fd, err := unix.MemfdCreate("paperclip-bwrap-args", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("sandbox: options file: %w", err)
	}
	f := os.NewFile(uintptr(fd), "bwrap-args")
	var b strings.Builder
	for _, o := range opts {
		b.WriteString(o)
		b.WriteByte(0)
	}
	if _, err := f.WriteString(b.String()); err != nil {
		f.Close()
		return nil, fmt.Errorf("sandbox: options file: %w", err)
	}
	if _, err := f.Seek(0, 0); err != nil {
		f.Close()
		return nil, fmt.Errorf("sandbox: options file: %w", err)
	}
	return f, nil
}
