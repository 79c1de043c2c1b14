// Package domain holds the control plane's plain data types. They carry JSON
// tags because the HTTP API returns them as they are (camelCase, RFC 3339).
package domain

import (
	"encoding/json"
	"net/url"
	"strings"
	"time"
)

// Membership roles, from most to least powerful.
const (
	RoleOwner  = "owner"
	RoleAdmin  = "admin"
	RoleMember = "member"
	RoleViewer = "viewer"
)

// PermManageConnections lets a member manage tool and email connections.
const PermManageConnections = "tools:manage_connections"

// Agent statuses.
const (
	AgentActive          = "active"
	AgentPaused          = "paused"
	AgentTerminated      = "terminated"
	AgentPendingApproval = "pending_approval"
)

// Trust presets.
const (
	TrustStandard       = "standard"
	TrustLowTrustReview = "low_trust_review"
)

// Issue (task) statuses.
const (
	IssueBacklog    = "backlog"
	IssueTodo       = "todo"
	IssueInProgress = "in_progress"
	IssueInReview   = "in_review"
	IssueBlocked    = "blocked"
	IssueDone       = "done"
	IssueCancelled  = "cancelled"
)

// Run statuses.
const (
	RunQueued    = "queued"
	RunRunning   = "running"
	RunSucceeded = "succeeded"
	RunFailed    = "failed"
	RunCancelled = "cancelled"
	RunTimedOut  = "timed_out"
	RunRefused   = "refused"
)

// InstanceSettings are the instance-wide switches.
type InstanceSettings struct {
	Experimental ExperimentalSettings `json:"experimental"`
	// AgentCLI holds the instance administrator's settings of the CLI
	// agent adapters, keyed by adapter type (claude_local, codex_local).
	AgentCLI map[string]AgentCLISettings `json:"agentCli,omitempty"`
}

// AgentCLISettings is how this instance runs one CLI agent adapter: what
// executes on the host, so only an instance administrator sets it.
type AgentCLISettings struct {
	// Command is the executable (absolute, or looked up on the server's
	// PATH); empty means "claude" or "codex".
	Command string `json:"command,omitempty"`
	// InstallDir is bound read-only into sandboxes so the CLI finds its
	// own files; empty derives it from the command.
	InstallDir string `json:"installDir,omitempty"`
	// PassEnv names server environment variables handed to the CLI (its
	// provider credentials); their values are read at run time, never stored.
	PassEnv []string `json:"passEnv,omitempty"`
	// EgressHosts are the destinations (host or host:port) a sandboxed run
	// may reach when its environment allows network; empty means the
	// provider's default API hosts.
	EgressHosts []string `json:"egressHosts,omitempty"`
}

// ExperimentalSettings are feature flags that default to off.
type ExperimentalSettings struct {
	EnableChatConnectors     bool `json:"enableChatConnectors"`
	EnableIsolatedWorkspaces bool `json:"enableIsolatedWorkspaces"`
}

// User is a board user (a human).
type User struct {
	ID              string    `json:"id"`
	Email           string    `json:"email"`
	Name            string    `json:"name"`
	IsInstanceAdmin bool      `json:"isInstanceAdmin"`
	CreatedAt       time.Time `json:"createdAt"`
}

// Company is a tenant; everything else belongs to exactly one company.
type Company struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
}

// Membership is a user's role and named permissions in a company.
type Membership struct {
	CompanyID   string    `json:"companyId"`
	UserID      string    `json:"userId"`
	Email       string    `json:"email,omitempty"`
	Role        string    `json:"role"`
	Permissions []string  `json:"permissions"`
	CreatedAt   time.Time `json:"createdAt"`
}

// BoardAPIKey is a board user's API key; the token is shown only at creation.
type BoardAPIKey struct {
	ID        string    `json:"id"`
	UserID    string    `json:"userId"`
	CompanyID string    `json:"companyId,omitempty"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"createdAt"`
	// LastUsedAt is when the key last authenticated, to within a minute
	// (store.NoteBoardKeyUsed); nil when never used.
	LastUsedAt *time.Time `json:"lastUsedAt,omitempty"`
	RevokedAt  *time.Time `json:"revokedAt,omitempty"`
}

// TrustBoundary limits which tasks a low-trust agent may see and where its
// incoming tasks are placed.
type TrustBoundary struct {
	CompanyID   string   `json:"companyId,omitempty"`
	ProjectIDs  []string `json:"projectIds,omitempty"`
	RootIssueID string   `json:"rootIssueId,omitempty"`
}

// AuthorizationPolicy holds an agent's authorization limits.
type AuthorizationPolicy struct {
	TrustBoundary *TrustBoundary `json:"trustBoundary,omitempty"`
}

// AgentPermissions are an agent's trust settings.
type AgentPermissions struct {
	TrustPreset         string               `json:"trustPreset"`
	AuthorizationPolicy *AuthorizationPolicy `json:"authorizationPolicy,omitempty"`
}

// Boundary returns the agent's trust boundary, or nil.
func (p AgentPermissions) Boundary() *TrustBoundary {
	if p.AuthorizationPolicy == nil {
		return nil
	}
	return p.AuthorizationPolicy.TrustBoundary
}

// Agent is an AI worker run through an adapter.
type Agent struct {
	ID                 string           `json:"id"`
	CompanyID          string           `json:"companyId"`
	Name               string           `json:"name"`
	Status             string           `json:"status"`
	AdapterType        string           `json:"adapterType"`
	AdapterConfig      json.RawMessage  `json:"adapterConfig"`
	Permissions        AgentPermissions `json:"permissions"`
	BudgetMonthlyCents int64            `json:"budgetMonthlyCents"`
	SpentMonthlyCents  int64            `json:"spentMonthlyCents"`
	SpendPeriod        string           `json:"spendPeriod,omitempty"`
	EnvironmentID      string           `json:"environmentId,omitempty"`
	// HostExecutionApproved is true when an instance administrator wrote
	// the agent's host-executing adapter configuration (process command,
	// args, env, cwd; an http URL that is not public). Otherwise a process
	// agent runs only in an active sandbox environment and an http agent
	// reaches only public addresses. Read-only in the API.
	HostExecutionApproved bool      `json:"hostExecutionApproved"`
	CreatedAt             time.Time `json:"createdAt"`
	UpdatedAt             time.Time `json:"updatedAt"`
}

// OverBudget reports whether the agent has spent its monthly budget in the
// month (UTC) that contains now. An agent without a budget never is.
func (a Agent) OverBudget(now time.Time) bool {
	return a.BudgetMonthlyCents > 0 && a.SpendPeriod == now.UTC().Format("2006-01") &&
		a.SpentMonthlyCents >= a.BudgetMonthlyCents
}

// ProcessAdapterConfig configures the process adapter.
type ProcessAdapterConfig struct {
	Command    string            `json:"command"`
	Args       []string          `json:"args,omitempty"`
	Env        map[string]string `json:"env,omitempty"`
	Cwd        string            `json:"cwd,omitempty"`
	TimeoutSec int               `json:"timeoutSec,omitempty"`
}

// HTTPAdapterConfig configures the http adapter.
type HTTPAdapterConfig struct {
	URL        string            `json:"url"`
	Headers    map[string]string `json:"headers,omitempty"`
	TimeoutSec int               `json:"timeoutSec,omitempty"`
}

// ProjectWorkspace is a project's optional workspace configuration.
type ProjectWorkspace struct {
	Strategy string `json:"strategy"`
	Path     string `json:"path,omitempty"`
}

// Project groups tasks and may configure a workspace.
type Project struct {
	ID        string            `json:"id"`
	CompanyID string            `json:"companyId"`
	Name      string            `json:"name"`
	Workspace *ProjectWorkspace `json:"workspace,omitempty"`
	CreatedAt time.Time         `json:"createdAt"`
	UpdatedAt time.Time         `json:"updatedAt"`
}

// Environment is where agent runs execute: local or a sandbox.
type Environment struct {
	ID        string `json:"id"`
	CompanyID string `json:"companyId"`
	Name      string `json:"name"`
	Driver    string `json:"driver"`
	Provider  string `json:"provider,omitempty"`
	Status    string `json:"status"`
	// AllowNetwork lets sandboxed CLI agents reach their model provider's
	// API through the run's egress proxy (never the host's network).
	AllowNetwork bool      `json:"allowNetwork"`
	CreatedAt    time.Time `json:"createdAt"`
	UpdatedAt    time.Time `json:"updatedAt"`
}

// Issue is a task.
type Issue struct {
	ID                         string          `json:"id"`
	CompanyID                  string          `json:"companyId"`
	Title                      string          `json:"title"`
	Description                string          `json:"description"`
	Status                     string          `json:"status"`
	Priority                   string          `json:"priority"`
	AssigneeAgentID            string          `json:"assigneeAgentId,omitempty"`
	ParentID                   string          `json:"parentId,omitempty"`
	ProjectID                  string          `json:"projectId,omitempty"`
	OriginKind                 string          `json:"originKind"`
	OriginID                   string          `json:"originId,omitempty"`
	IdempotencyKey             string          `json:"idempotencyKey,omitempty"`
	ExecutionWorkspaceSettings json.RawMessage `json:"executionWorkspaceSettings,omitempty"`
	ExecutionRunID             string          `json:"executionRunId,omitempty"`
	CheckoutRunID              string          `json:"checkoutRunId,omitempty"`
	ResponsibleUserID          string          `json:"responsibleUserId,omitempty"`
	CreatedByUserID            string          `json:"createdByUserId,omitempty"`
	CreatedByAgentID           string          `json:"createdByAgentId,omitempty"`
	CreatedAt                  time.Time       `json:"createdAt"`
	UpdatedAt                  time.Time       `json:"updatedAt"`
	CompletedAt                *time.Time      `json:"completedAt,omitempty"`
	CancelledAt                *time.Time      `json:"cancelledAt,omitempty"`
	// Number and Identifier are the task's short id in its company
	// (ACME-12): the API and the CLI take the identifier wherever a task
	// id goes.
	Number     int64  `json:"number,omitempty"`
	Identifier string `json:"identifier,omitempty"`
}

// Comment is a message on a task by a user, an agent or the system.
type Comment struct {
	ID            string    `json:"id"`
	CompanyID     string    `json:"companyId"`
	IssueID       string    `json:"issueId"`
	Body          string    `json:"body"`
	AuthorKind    string    `json:"authorKind"`
	AuthorAgentID string    `json:"authorAgentId,omitempty"`
	AuthorUserID  string    `json:"authorUserId,omitempty"`
	RunID         string    `json:"runId,omitempty"`
	CreatedAt     time.Time `json:"createdAt"`
}

// Attachment is a file stored content-addressed under the home directory.
type Attachment struct {
	ID               string    `json:"id"`
	CompanyID        string    `json:"companyId"`
	IssueID          string    `json:"issueId"`
	Filename         string    `json:"filename"`
	ContentType      string    `json:"contentType"`
	SizeBytes        int64     `json:"sizeBytes"`
	SHA256           string    `json:"sha256"`
	CreatedByUserID  string    `json:"createdByUserId,omitempty"`
	CreatedByAgentID string    `json:"createdByAgentId,omitempty"`
	CreatedAt        time.Time `json:"createdAt"`
}

// Activity is one audit-log entry.
type Activity struct {
	ID         string          `json:"id"`
	CompanyID  string          `json:"companyId,omitempty"`
	ActorKind  string          `json:"actorKind"`
	ActorID    string          `json:"actorId"`
	AgentID    string          `json:"agentId,omitempty"`
	RunID      string          `json:"runId,omitempty"`
	Action     string          `json:"action"`
	EntityType string          `json:"entityType"`
	EntityID   string          `json:"entityId"`
	Details    json.RawMessage `json:"details"`
	CreatedAt  time.Time       `json:"createdAt"`
}

// ActivityActor is who an audit-log entry is by: a board user, an agent in
// a run, or the system (Kind "system", with a name such as "agentmail" as
// ID and the agent it acted for as AgentID).
type ActivityActor struct {
	Kind    string
	ID      string
	AgentID string
	RunID   string
}

// SystemActor is the audit actor of automatic work done by name on behalf
// of agentID (which may be empty).
func SystemActor(name, agentID string) ActivityActor {
	return ActivityActor{Kind: "system", ID: name, AgentID: agentID}
}

// ActionPolicy allows or denies an actor a named action, optionally with a
// rate limit.
type ActionPolicy struct {
	ID                     string    `json:"id"`
	CompanyID              string    `json:"companyId"`
	Action                 string    `json:"action"`
	ActorKind              string    `json:"actorKind"`
	ActorID                string    `json:"actorId"`
	Effect                 string    `json:"effect"`
	RateLimitCount         int       `json:"rateLimitCount,omitempty"`
	RateLimitWindowSeconds int       `json:"rateLimitWindowSeconds,omitempty"`
	Reason                 string    `json:"reason,omitempty"`
	CreatedAt              time.Time `json:"createdAt"`
}

// Secret is a vaulted company secret's metadata; its value never leaves the vault.
type Secret struct {
	ID            string    `json:"id"`
	CompanyID     string    `json:"companyId"`
	Name          string    `json:"name"`
	Provider      string    `json:"provider"`
	Status        string    `json:"status"`
	LatestVersion int       `json:"latestVersion"`
	CreatedAt     time.Time `json:"createdAt"`
	UpdatedAt     time.Time `json:"updatedAt"`
}

// SecretBinding records that an object uses a secret at a config path.
type SecretBinding struct {
	ID              string    `json:"id"`
	CompanyID       string    `json:"companyId"`
	SecretID        string    `json:"secretId"`
	TargetType      string    `json:"targetType"`
	TargetID        string    `json:"targetId"`
	ConfigPath      string    `json:"configPath"`
	VersionSelector string    `json:"versionSelector"`
	Required        bool      `json:"required"`
	CreatedAt       time.Time `json:"createdAt"`
}

// IssueStateGuard makes a wake conditional on its task still being in one of
// the listed states (and, when set, still assigned to the agent).
type IssueStateGuard struct {
	IssueID           string   `json:"issueId"`
	Statuses          []string `json:"statuses,omitempty"`
	RequireAssignment bool     `json:"requireAssignment,omitempty"`
}

// Run is a heartbeat run: one execution of an agent for a wake request.
type Run struct {
	ID              string           `json:"id"`
	CompanyID       string           `json:"companyId"`
	AgentID         string           `json:"agentId"`
	IssueID         string           `json:"issueId,omitempty"`
	Status          string           `json:"status"`
	WakeSource      string           `json:"wakeSource"`
	WakeReason      string           `json:"wakeReason"`
	WakeCommentID   string           `json:"wakeCommentId,omitempty"`
	IdempotencyKey  string           `json:"idempotencyKey,omitempty"`
	Payload         json.RawMessage  `json:"payload,omitempty"`
	ContextSnapshot json.RawMessage  `json:"contextSnapshot,omitempty"`
	IssueStateGuard *IssueStateGuard `json:"issueStateGuard,omitempty"`
	RefusalReason   string           `json:"refusalReason,omitempty"`
	Error           string           `json:"error,omitempty"`
	ExitCode        *int             `json:"exitCode,omitempty"`
	Attempt         int              `json:"attempt"`
	RetryOfRunID    string           `json:"retryOfRunId,omitempty"`
	RequestedByKind string           `json:"requestedByKind,omitempty"`
	RequestedByID   string           `json:"requestedById,omitempty"`
	// SessionID is the CLI conversation the run used (CLI agents).
	SessionID string `json:"sessionId,omitempty"`
	// Usage is what the run consumed, when its adapter reports it.
	Usage      *RunUsage  `json:"usage,omitempty"`
	CreatedAt  time.Time  `json:"createdAt"`
	StartedAt  *time.Time `json:"startedAt,omitempty"`
	FinishedAt *time.Time `json:"finishedAt,omitempty"`
	UpdatedAt  time.Time  `json:"updatedAt"`
	// CancelRequestedAt is set when someone asked to cancel the run while
	// it was running; CancelReason says why ("agent paused", …).
	CancelRequestedAt *time.Time `json:"cancelRequestedAt,omitempty"`
	CancelReason      string     `json:"cancelReason,omitempty"`
}

// RunUsage is what a run consumed. Cost is counted against the agent's
// monthly budget.
type RunUsage struct {
	InputTokens         int64 `json:"inputTokens"`
	CachedInputTokens   int64 `json:"cachedInputTokens"`
	CacheCreationTokens int64 `json:"cacheCreationTokens"`
	OutputTokens        int64 `json:"outputTokens"`
	// CostMicros is the cost in millionths of a US dollar; CostUSD the same
	// in dollars.
	CostMicros int64   `json:"costMicros"`
	CostUSD    float64 `json:"costUsd"`
}

// Terminal reports whether the run status is final.
func (r Run) Terminal() bool {
	switch r.Status {
	case RunQueued, RunRunning:
		return false
	}
	return true
}

// SecretTargetAgent is the secret-binding target type of an agent's
// write-only adapter values; their config paths are "env.NAME" and
// "headers.Name".
const SecretTargetAgent = "agent"

// WriteOnlyValue stands in for every adapter setting value that is never
// shown (process env values, http header values). Sending it back in a
// PATCH keeps the stored value.
const WriteOnlyValue = "********"

// writeOnlyFields are the adapterConfig objects whose values are write-only.
var writeOnlyFields = []string{"env", "headers"}

// MarshalJSON writes the agent with every write-only adapter value
// replaced by WriteOnlyValue, so no API response, stored actor or tool
// result can carry one.
func (a Agent) MarshalJSON() ([]byte, error) {
	type plain Agent
	out := plain(a)
	out.AdapterConfig = MaskAdapterConfig(a.AdapterConfig)
	return json.Marshal(out)
}

// MaskAdapterConfig returns cfg with the values of its write-only objects
// (env, headers) replaced by WriteOnlyValue. A config that is not a JSON
// object is returned as an empty object rather than risk echoing a value.
func MaskAdapterConfig(cfg json.RawMessage) json.RawMessage {
	if len(cfg) == 0 {
		return cfg
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(cfg, &m); err != nil {
		return json.RawMessage(`{}`)
	}
	if raw, ok := m["url"]; ok {
		var u string
		if json.Unmarshal(raw, &u) == nil {
			m["url"], _ = json.Marshal(MaskURL(u))
		}
	}
	for _, f := range writeOnlyFields {
		raw, ok := m[f]
		if !ok {
			continue
		}
		var vals map[string]json.RawMessage
		if err := json.Unmarshal(raw, &vals); err != nil {
			delete(m, f)
			continue
		}
		masked := make(map[string]string, len(vals))
		for k := range vals {
			masked[k] = WriteOnlyValue
		}
		b, _ := json.Marshal(masked)
		m[f] = b
	}
	b, err := json.Marshal(m)
	if err != nil {
		return json.RawMessage(`{}`)
	}
	return b
}

// MaskURL returns raw with its userinfo and query (where credentials
// travel: https://user:token@host/hook?key=…) replaced by WriteOnlyValue;
// the http adapter's URL shows them like env values. A URL that does not
// parse is masked whole.
func MaskURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return WriteOnlyValue
	}
	hasUser, hasQuery := u.User != nil, u.RawQuery != ""
	u.User, u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = nil, "", false, "", ""
	// Spliced in as text: url.URL.String would percent-escape the mask.
	s := u.String()
	if hasUser {
		s = strings.Replace(s, "://", "://"+WriteOnlyValue+"@", 1)
	}
	if hasQuery {
		s += "?" + WriteOnlyValue
	}
	return s
}

// URL secret paths: the http adapter URL's userinfo and query are vaulted
// under these config paths.
const (
	URLUserinfoPath = "url.userinfo"
	URLQueryPath    = "url.query"
)

// UnmaskURL returns the masked stored URL with the vaulted userinfo and
// query put back (secrets by path, as bound to the agent).
func UnmaskURL(stored string, secrets map[string]string) string {
	if !strings.Contains(stored, WriteOnlyValue) {
		return stored // nothing vaulted: the URL exactly as written
	}
	u, err := url.Parse(stored)
	if err != nil {
		return stored
	}
	if u.User != nil && u.User.Username() == WriteOnlyValue {
		if v, ok := secrets[URLUserinfoPath]; ok {
			if p, err := url.Parse("http://" + v + "@x/"); err == nil && p.User != nil {
				u.User = p.User
			}
		}
	}
	if u.RawQuery == WriteOnlyValue {
		if v, ok := secrets[URLQueryPath]; ok {
			u.RawQuery = v
		}
	}
	return u.String()
}
