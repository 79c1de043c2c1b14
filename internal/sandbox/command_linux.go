//go:build linux

package sandbox

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

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
