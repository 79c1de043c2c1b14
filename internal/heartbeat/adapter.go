package heartbeat

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/sandbox"
)

// RunSpec is everything an adapter needs to execute one run.
type RunSpec struct {
	Run   domain.Run
	Agent domain.Agent
	// Token is the run-scoped bearer token; valid only while the run runs.
	Token string
	// APIURL is the control plane's API base ("http://host:port/api").
	APIURL string
	// Workdir is the task's workspace directory.
	Workdir string
	// RunDir is the run's private scratch directory (under the hidden runs
	// directory): the skills directory and the sandbox bridge live there.
	// It is removed once the run's outcome is recorded.
	RunDir string
	// Home is a host run's HOME: <RunDir>/home, fresh and 0700, never a
	// directory an agent wrote before. Empty for sandboxed runs (their
	// HOME is the task directory, inside the sandbox).
	Home string
	// SkillsDir is the run's read-only skills directory.
	SkillsDir string
	// ExtraEnv is added to the run environment by Options.Prepare hooks.
	ExtraEnv map[string]string
	// Secrets are the write-only adapter values resolved from the vault,
	// by configuration path ("env.NAME", "headers.Name").
	Secrets map[string]string
	// Environment is the agent's execution environment; nil runs locally.
	Environment *domain.Environment
	// Hidden are host paths of the control plane (workspaces root, the
	// instance directory, the master key) that a sandboxed run must never
	// see beyond its own binds.
	Hidden []string
	// SandboxUser is the identity sandboxed processes run as.
	SandboxUser sandbox.Identity
	// Binary is the server's own executable and BinDir a host directory
	// holding it as "paperclipai"; both put paperclipai on the run's PATH.
	Binary, BinDir string
	// Isolated is set when the task asks for an isolated workspace: the
	// run works only inside its own task directory.
	Isolated bool
	// TaskIdentifier is the run task's short identifier (ACME-12), which
	// the sandbox bridge accepts as well as its UUID; empty without a task.
	TaskIdentifier string
}

// bridgeGrant is the authority a sandboxed run's API bridge lends it: the
// run's token, company and task (by UUID or identifier).
func (s RunSpec) bridgeGrant() sandbox.Grant {
	return sandbox.Grant{Token: s.Token, RunID: s.Run.ID, CompanyID: s.Run.CompanyID, TaskID: s.Run.IssueID,
		TaskIdentifier: s.TaskIdentifier}
}

// Environment driver and status values (agents.environment_id targets).
const (
	envDriverSandbox = "sandbox"
	envStatusActive  = "active"
)

// Sandboxed reports whether the run executes in a sandbox environment.
func (s RunSpec) Sandboxed() bool {
	return s.Environment != nil && s.Environment.Driver == envDriverSandbox
}

// checkSandbox returns why a sandboxed run cannot start, or nil.
func (s RunSpec) checkSandbox() error {
	if s.Environment.Status != envStatusActive {
		return fmt.Errorf("sandbox environment %q (%s) is not active (status %s)", s.Environment.Name, s.Environment.ID, s.Environment.Status)
	}
	if s.Workdir == "" {
		return errors.New("sandbox environment requires a task directory (workspaces are disabled)")
	}
	return nil
}

// Env returns the agent CLI environment for this run (docs/agents.md).
func (s RunSpec) Env() map[string]string {
	env := map[string]string{
		"PAPERCLIP_API_URL":         s.APIURL,
		"PAPERCLIP_API_KEY":         s.Token,
		"PAPERCLIP_COMPANY_ID":      s.Run.CompanyID,
		"PAPERCLIP_AGENT_ID":        s.Run.AgentID,
		"PAPERCLIP_RUN_ID":          s.Run.ID,
		"PAPERCLIP_TASK_ID":         s.Run.IssueID,
		"PAPERCLIP_WAKE_REASON":     s.Run.WakeReason,
		"PAPERCLIP_WAKE_COMMENT_ID": s.Run.WakeCommentID,
		"PAPERCLIP_SKILLS_DIR":      s.SkillsDir,
	}
	for k, v := range s.ExtraEnv {
		env[k] = v
	}
	return env
}

// secretValue returns the value of a write-only adapter setting: the vault
// value when one is bound at path, else the stored value (settings saved
// before values moved to the vault).
func (s RunSpec) secretValue(path, stored string) string {
	if v, ok := s.Secrets[path]; ok {
		return v
	}
	return stored
}

// defaultPath is the PATH of a run when the server has none.
const defaultPath = "/usr/local/bin:/usr/bin:/bin"

// serverPath is the server's PATH (or defaultPath).
func serverPath() string {
	if p := os.Getenv("PATH"); p != "" {
		return p
	}
	return defaultPath
}

// Result is an adapter's report of a finished run.
type Result struct {
	Status    string
	ExitCode  *int
	Error     string
	Log       []byte
	LogSize   int64
	Truncated bool
	// Secrets are further values the run held (the instance's passEnv
	// credentials of a CLI agent, a process agent's env values): the
	// scheduler masks them, with the vaulted ones, in the stored log.
	Secrets []string
}

// Adapter executes runs of one adapter type.
type Adapter interface {
	Run(ctx context.Context, spec RunSpec, logMax int) Result
}

var (
	_ Adapter     = ProcessAdapter{}
	_ Adapter     = HTTPAdapter{}
	_ HostProgram = ProcessAdapter{}
)

// HostProgram is implemented by adapters that execute a program on this
// host (the process adapter; local coding agents alike). Such a program
// can be confined in a sandbox environment, and runs unconfined only when
// an instance administrator wrote its configuration. Adapters that call a
// remote service (http) cannot be confined.
type HostProgram interface {
	ExecutesHostProgram() bool
}

// executesHostProgram reports whether a runs a program on this host.
func executesHostProgram(a Adapter) bool {
	h, ok := a.(HostProgram)
	return ok && h.ExecutesHostProgram()
}

// capBuffer keeps the first max bytes written and counts the rest; safe for
// concurrent writers (stdout and stderr share it).
type capBuffer struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	max   int
	total int64
}

func (c *capBuffer) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.total += int64(len(p))
	if room := c.max - c.buf.Len(); room > 0 {
		if len(p) > room {
			c.buf.Write(p[:room])
		} else {
			c.buf.Write(p)
		}
	}
	return len(p), nil
}

func (c *capBuffer) result() ([]byte, int64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]byte(nil), c.buf.Bytes()...), c.total, c.total > int64(c.buf.Len())
}
