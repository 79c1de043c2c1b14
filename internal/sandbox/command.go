package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
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
