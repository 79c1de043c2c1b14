package sandbox

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
)

// ErrCommandPlacement means a program lies where no sandbox can run it:
// the directory bound read-only for it would expose the Paperclip home or
// contain the task directories.
var ErrCommandPlacement = errors.New("sandbox: the agent command cannot run in a sandbox from where it is installed")

// CheckPlacement reports, before any run, why a sandboxed run of command
// would fail because of where the program lives (the same rule Command
// applies at start): outside the system directories its own directory is
// bound read-only, so that directory must neither contain nor lie inside
// any of hidden (the Paperclip home's private parts), nor contain
// workspaces (every task directory). A program in the user's home
// directory, when the Paperclip home is inside it, is the usual case. A
// command that cannot be found is not refused here: it may be installed
// later, and the run reports it then.
func CheckPlacement(command string, hidden []string, workspaces string) error {
	if command == "" {
		return nil
	}
	path := command
	if p, err := resolveCommand(command); err == nil {
		path = p
	} else if !filepath.IsAbs(command) {
		return nil
	}
	dir := filepath.Dir(filepath.Clean(path))
	if underSystem(dir) {
		return nil
	}
	var overlaps []string
	for _, h := range hidden {
		if h = filepath.Clean(h); h != "." && (within(h, dir) || within(dir, h)) {
			overlaps = append(overlaps, h)
		}
	}
	if workspaces != "" && within(filepath.Clean(workspaces), dir) {
		overlaps = append(overlaps, filepath.Clean(workspaces))
	}
	if len(overlaps) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s is in %s, which a sandbox would have to show and which overlaps the Paperclip home (%s); "+
		"install the program outside the Paperclip home and its parent directories (for example in /usr/local/bin or /opt/<agent>)",
		ErrCommandPlacement, path, dir, strings.Join(overlaps, ", "))
}
