package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
)

// Paths of a CLI agent's per-run files inside the sandbox.
const (
	// MCPConfigPath is where a Claude Code run's MCP configuration is bound.
	MCPConfigPath = ControlDir + "/mcp.json"
	// CodexHome is where a Codex run's private CODEX_HOME is bound.
	CodexHome = ControlDir + "/codex-home"
	// EgressSocket is where the run's egress proxy socket is bound.
	EgressSocket = ControlDir + "/egress.sock"
)

// Bind is one extra bind of a run's own file or directory. Src is a host
// path the server created for the run (in its private run directory);
// Dest lies under ControlDir, or inside the task directory where the CLI
// expects a file (a skill), and is mounted over whatever the agent put
// there. A read-only Bind cannot be changed by the agent even when the
// destination is inside its writable task directory.
type Bind struct {
	Src, Dest string
	RW        bool
}

// bindMounts validates binds and returns their mounts.
func bindMounts(binds []Bind, workdir string) ([]mount, error) {
	var out []mount
	for _, b := range binds {
		src, dest := filepath.Clean(b.Src), filepath.Clean(b.Dest)
		if !filepath.IsAbs(b.Src) || !filepath.IsAbs(b.Dest) {
			return nil, fmt.Errorf("sandbox: bind %s -> %s: paths must be absolute", b.Src, b.Dest)
		}
		if !(within(dest, ControlDir) && dest != ControlDir) && !(within(dest, workdir) && dest != workdir) {
			return nil, fmt.Errorf("sandbox: bind destination %s must lie under %s or inside the task directory", dest, ControlDir)
		}
		fi, err := os.Lstat(src)
		if err != nil {
			return nil, fmt.Errorf("sandbox: bind source: %w", err)
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			return nil, fmt.Errorf("sandbox: bind source %s is a symlink", src)
		}
		out = append(out, mount{src: src, dest: dest, dir: fi.IsDir(), rw: b.RW})
	}
	return out, nil
}
