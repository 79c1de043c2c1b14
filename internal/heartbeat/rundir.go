package heartbeat

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/store"
)

// removeRunDir removes a run's private directory (its MCP configuration
// with the run token, CODEX_HOME, staged skills, bridge and HOME). The run
// may have left directories without write permission (a host agent's
// chmod in its HOME); those are made writable first, through a descriptor
// opened without following symlinks, so a link planted meanwhile cannot
// redirect the change.
func removeRunDir(dir string) error {
	if dir == "" {
		return nil
	}
	if err := os.RemoveAll(dir); err == nil {
		return nil
	}
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		fd, err := unix.Open(p, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil
		}
		_ = unix.Fchmod(fd, 0o700)
		_ = unix.Close(fd)
		return nil
	})
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove run directory: %w", err)
	}
	return nil
}

// sweepRunDirs removes the run directories a previous process left behind
// (it stopped before recording its runs). A directory of a run that is
// still running is kept: with a shared database that run may belong to a
// live process using the same home. At start with the database to itself,
// every such run has just been failed by sweepOrphans.
func (s *Service) sweepRunDirs(ctx context.Context) error {
	if s.opts.RunsDir == "" {
		return nil
	}
	entries, err := os.ReadDir(s.opts.RunsDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("sweep run directories: %w", err)
	}
	var errs []error
	for _, e := range entries {
		run, err := s.st.GetRun(ctx, s.st.DB, e.Name())
		switch {
		case err == nil && run.Status == domain.RunRunning:
			continue
		case err != nil && !errors.Is(err, store.ErrNotFound):
			errs = append(errs, err)
			continue
		}
		if err := removeRunDir(filepath.Join(s.opts.RunsDir, e.Name())); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
