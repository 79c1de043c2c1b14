package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// User is the name of the dedicated host account sandboxes run as when the
// server runs as root. When no such account exists, NobodyID is used.
const User = "paperclip-sandbox"

// NobodyID is the uid and gid a root server's sandboxes fall back to when
// the User account does not exist (nobody/nogroup on Debian and Ubuntu).
const NobodyID = 65534

// Identity is the host user and group that bubblewrap, and therefore every
// sandboxed process, runs as.
type Identity struct {
	UID, GID int
	// Name describes the identity in messages ("paperclip-sandbox",
	// "nobody", or "the server's user").
	Name string
	// Switch is true when the server runs as root and must change to this
	// identity before starting bubblewrap. A sandbox never runs as host
	// uid 0: with it, a remount or a /proc/sys write inside the sandbox
	// would reach the host.
	Switch bool
}

// HostIdentity returns the identity sandboxes run as. A server running as
// root uses the User account when it exists (its primary group as gid) and
// NobodyID:NobodyID otherwise; a server running as any other user starts
// bubblewrap as itself, since it cannot change identity.
func HostIdentity() (Identity, error) {
	if os.Geteuid() != 0 {
		return Identity{UID: os.Getuid(), GID: os.Getgid(), Name: "the server's user"}, nil
	}
	u, err := user.Lookup(User)
	var unknown user.UnknownUserError
	switch {
	case errors.As(err, &unknown):
		return Identity{UID: NobodyID, GID: NobodyID, Name: "nobody", Switch: true}, nil
	case err != nil:
		return Identity{}, fmt.Errorf("sandbox: look up user %s: %w", User, err)
	}
	uid, err1 := strconv.Atoi(u.Uid)
	gid, err2 := strconv.Atoi(u.Gid)
	if err1 != nil || err2 != nil {
		return Identity{}, fmt.Errorf("sandbox: user %s has a non-numeric uid or gid", User)
	}
	if uid == 0 || gid == 0 {
		return Identity{}, fmt.Errorf("sandbox: user %s must not have uid or gid 0", User)
	}
	return Identity{UID: uid, GID: gid, Name: User, Switch: true}, nil
}

// Own makes path (not following a final symlink) belong to the identity,
// when the server switches identity; otherwise it does nothing.
func (id Identity) Own(path string) error {
	if !id.Switch {
		return nil
	}
	if err := unix.Fchownat(unix.AT_FDCWD, path, id.UID, id.GID, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("sandbox: give %s to %s: %w", path, id.Name, err)
	}
	return nil
}

// OwnTree is Own for dir and everything below it; symlinks are changed
// themselves, never followed.
func (id Identity) OwnTree(dir string) error {
	if !id.Switch {
		return nil
	}
	return filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return id.Own(p)
	})
}
