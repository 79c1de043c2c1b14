// Package heartbeat wakes agents: it turns wake requests into durable,
// deduplicated runs, starts queued runs through the agent's adapter (one
// running run per agent), issues each run a token that dies with it, and
// recovers runs orphaned by a dead process.
package heartbeat

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/paperclipai/paperclipai/internal/authz"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/notify"
	"github.com/paperclipai/paperclipai/internal/sandbox"
	"github.com/paperclipai/paperclipai/internal/store"
)

// Refusal reasons recorded on refused runs.
const (
	RefusedAgentPaused     = "agent_paused"
	RefusedAgentTerminated = "agent_terminated"
	RefusedAgentNotActive  = "agent_not_active"
	RefusedBudgetExceeded  = "budget_exceeded"
	RefusedIssueState      = "issue_state_changed"
	RefusedIssueMissing    = "issue_not_found"
)

// WakeRequest asks for an agent to run.
type WakeRequest struct {
	Source             string
	Reason             string
	IdempotencyKey     string
	IssueID            string
	CommentID          string
	Payload            json.RawMessage
	ContextSnapshot    json.RawMessage
	IssueStateGuard    *domain.IssueStateGuard
	AllowRunCoalescing bool
	RequestedByKind    string
	RequestedByID      string
	// AlsoAudit, when set, builds the caller's own audit entry of this
	// wake from the run it recorded (or found, for a repeated key or a
	// coalesced wake). WakeupTx writes it with the wake's entry in one
	// statement, a round trip fewer for callers that audit every wake.
	AlsoAudit func(run domain.Run) (*domain.Activity, error)
}

// Observer receives scheduling events (metrics); any field may be nil.
type Observer struct {
	RunStarted  func(wakeToStart time.Duration)
	RunFinished func(status string, d time.Duration)
}

// Options configure a Service.
type Options struct {
	Store    *store.Store
	Logger   *slog.Logger
	RunnerID string
	// APIURL is the base URL agents call back ("http://host:port/api").
	APIURL string
	// Adapters run agents by adapter type.
	Adapters map[string]Adapter
	// LeaseTTL bounds how long a run survives its process; renewed at TTL/3.
	LeaseTTL time.Duration
	// MaxConcurrent caps runs executing in this process.
	MaxConcurrent int
	// LogMaxBytes caps each run's stored output.
	LogMaxBytes int
	// ExclusiveDatabase is true when no other process can share the database
	// (SQLite under the home lock): every running run found at start is then
	// orphaned at once instead of after its lease.
	ExclusiveDatabase bool
	// WorkspacesDir holds per-task working directories; RunsDir per-run
	// scratch (the skills directory, the sandbox bridge). Empty
	// WorkspacesDir disables both.
	WorkspacesDir string
	RunsDir       string
	// Home is the Paperclip home: no project workspace may lie inside it.
	Home string
	// Hidden are further host paths no sandbox may expose and no project
	// workspace may overlap (the instance directory, the master key file);
	// WorkspacesDir and RunsDir are always hidden.
	Hidden []string
	// SandboxUser is the identity sandboxed runs execute as
	// (sandbox.HostIdentity).
	SandboxUser sandbox.Identity
	// Binary is the server's own executable. When set, every run finds it
	// on its PATH as paperclipai: host runs through a link in BinDir
	// (default <RunsDir>/../bin), sandboxed runs through a read-only bind.
	Binary string
	BinDir string
	// Secrets, when set, resolves an agent's write-only adapter values
	// (vaulted env values and http headers) by configuration path.
	Secrets func(ctx context.Context, agent domain.Agent) (map[string]string, error)
	// Prepare, when set, is called before each run starts to add files or
	// environment (skills directory, workspace) to the spec.
	Prepare  func(ctx context.Context, spec *RunSpec) error
	Observer Observer
	// BudgetExceeded, when set, is called inside the transaction of a wake
	// refused because the agent's monthly budget is spent: the place to
	// emit an agent.budget_exceeded notification event (deduplicated by
	// the callee, per agent and month).
	BudgetExceeded func(ctx context.Context, tx *sql.Tx, agent domain.Agent) error
}

// Service is the heartbeat scheduler.
type Service struct {
	opts   Options
	st     *store.Store
	log    *slog.Logger
	signal notify.Signal
	// remote is nudged by other replicas' asks (listenQueued).
	remote notify.Signal
	// lastAsk is when this process last asked the others (askOthers; loop
	// goroutine only).
	lastAsk time.Time
	mu      sync.Mutex
	active  map[string]context.CancelCauseFunc
	wg      sync.WaitGroup
	stopped chan struct{}
	// listened is closed when the cancellation listener has ended.
	listened chan struct{}
	// cancel stops the scheduling loop (set by Start).
	cancel context.CancelFunc
	// runCtx is the parent of every run; cancelled only when the grace
	// period of a shutdown is over.
	runCtx    context.Context
	runCancel context.CancelFunc
	draining  bool
}

// New returns a Service; call Start to begin scheduling.
func New(o Options) *Service {
	if o.LeaseTTL <= 0 {
		o.LeaseTTL = 30 * time.Second
	}
	if o.MaxConcurrent <= 0 {
		o.MaxConcurrent = 8
	}
	if o.LogMaxBytes <= 0 {
		o.LogMaxBytes = 1 << 20
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	rc, cancel := context.WithCancel(context.Background())
	return &Service{opts: o, st: o.Store, log: o.Logger, signal: notify.New(), remote: notify.New(),
		active: map[string]context.CancelCauseFunc{}, stopped: make(chan struct{}), listened: make(chan struct{}),
		runCtx: rc, runCancel: cancel}
}

// RunnerID names this process in leases and run ownership.
func (s *Service) RunnerID() string { return s.opts.RunnerID }

// Notify nudges the scheduler to look for queued runs now.
func (s *Service) Notify() { s.signal.Notify() }

// Wakeup records a wake request for agent as a run (queued, or refused with
// a reason) and returns it. A repeated idempotency key returns the earlier
// run with created=false; so does a coalesced wake.
func (s *Service) Wakeup(ctx context.Context, agentID string, req WakeRequest) (domain.Run, bool, error) {
	var run domain.Run
	var created bool
	err := s.st.Tx(ctx, func(tx *sql.Tx) error {
		var err error
		run, created, err = s.WakeupTx(ctx, tx, agentID, req)
		return err
	})
	if err != nil {
		return domain.Run{}, false, err
	}
	if created && run.Status == domain.RunQueued {
		s.Notify()
	}
	return run, created, nil
}

// WakeupTx is Wakeup inside the caller's transaction (the caller must call
// Notify after commit). A created run's own audit entry and the caller's
// (AlsoAudit) are written with the run, in one statement on PostgreSQL;
// when no run was created, AlsoAudit's entry is still written, naming the
// run that was returned.
func (s *Service) WakeupTx(ctx context.Context, tx *sql.Tx, agentID string, req WakeRequest) (domain.Run, bool, error) {
	run, created, err := s.wakeup(ctx, tx, agentID, req)
	if err != nil {
		return domain.Run{}, false, err
	}
	if !created && req.AlsoAudit != nil {
		a, err := req.AlsoAudit(run)
		if err != nil {
			return domain.Run{}, false, err
		}
		if err := s.st.InsertActivity(ctx, tx, a); err != nil {
			return domain.Run{}, false, err
		}
	}
	return run, created, nil
}

// wakeup records the wake and returns its run and whether it created it;
// a created run's audit entries (its own and AlsoAudit's) are written
// with it.
func (s *Service) wakeup(ctx context.Context, tx *sql.Tx, agentID string, req WakeRequest) (domain.Run, bool, error) {
	if req.AllowRunCoalescing && req.IdempotencyKey != "" {
		// The keyed run wins over coalescing into another queued run.
		existing, err := s.st.RunByIdempotencyKey(ctx, tx, agentID, req.IdempotencyKey)
		if err == nil {
			return existing, false, nil
		}
		if !errors.Is(err, store.ErrNotFound) {
			return domain.Run{}, false, err
		}
	}
	agent, issue, err := s.wakeReads(ctx, tx, agentID, req.IssueID, req.AllowRunCoalescing)
	if err != nil {
		return domain.Run{}, false, err
	}
	issues := &issueReads{st: s.st, q: tx}
	if req.IssueID != "" {
		issues.seen = map[string]domain.Issue{req.IssueID: issue}
		if issue.CompanyID != agent.CompanyID {
			return domain.Run{}, false, fmt.Errorf("wakeup: %w", &store.NotFoundError{Op: "issue", What: "issue"})
		}
	}
	refusal, err := s.refusal(ctx, issues, agent, req.IssueID, req.IssueStateGuard)
	if err != nil {
		return domain.Run{}, false, err
	}
	if refusal == "" && req.AllowRunCoalescing {
		if q, err := s.st.QueuedRunFor(ctx, tx, agentID, req.IssueID); err == nil {
			return q, false, nil
		} else if !errors.Is(err, store.ErrNotFound) {
			return domain.Run{}, false, err
		}
	}
	run := domain.Run{CompanyID: agent.CompanyID, AgentID: agentID, IssueID: req.IssueID, Status: domain.RunQueued,
		WakeSource: req.Source, WakeReason: req.Reason, WakeCommentID: req.CommentID, IdempotencyKey: req.IdempotencyKey,
		Payload: req.Payload, ContextSnapshot: req.ContextSnapshot, IssueStateGuard: req.IssueStateGuard,
		RequestedByKind: req.RequestedByKind, RequestedByID: req.RequestedByID}
	if refusal != "" {
		run.Status = domain.RunRefused
		run.RefusalReason = refusal
	}
	action := "heartbeat.wakeup"
	if refusal != "" {
		action = "heartbeat.refused"
	}
	created, err := s.st.InsertRunAudited(ctx, tx, &run, func(run domain.Run) ([]*domain.Activity, error) {
		by := domain.ActivityActor{Kind: actorKind(req.RequestedByKind), ID: req.RequestedByID, AgentID: agentID}
		own, err := store.AuditEntry(by, agent.CompanyID, action, "heartbeat_run", run.ID, map[string]any{"reason": req.Reason,
			"source": req.Source, "refusalReason": refusal, "issueId": req.IssueID})
		if err != nil {
			return nil, err
		}
		entries := []*domain.Activity{own}
		if req.AlsoAudit != nil {
			a, err := req.AlsoAudit(run)
			if err != nil {
				return nil, err
			}
			entries = append(entries, a)
		}
		return entries, nil
	})
	if err != nil {
		return domain.Run{}, false, err
	}
	if created && refusal == RefusedBudgetExceeded && s.opts.BudgetExceeded != nil {
		if err := s.opts.BudgetExceeded(ctx, tx, agent); err != nil {
			return domain.Run{}, false, err
		}
	}
	return run, created, nil
}

// wakeReads reads the agent under the lock the wake needs (lockForWake)
// and the task issueID names, if any. Without coalescing both come from
// one statement on PostgreSQL (store.AgentSharedWithIssue): one round trip
// less in every email's transaction.
func (s *Service) wakeReads(ctx context.Context, tx *sql.Tx, agentID, issueID string, coalescing bool) (domain.Agent, domain.Issue, error) {
	if issueID != "" && !coalescing {
		return s.st.AgentSharedWithIssue(ctx, tx, agentID, issueID)
	}
	agent, err := s.lockForWake(ctx, tx, agentID, coalescing)
	if err != nil || issueID == "" {
		return agent, domain.Issue{}, err
	}
	issue, err := s.st.GetIssue(ctx, tx, issueID)
	return agent, issue, err
}

// lockForWake reads the agent for a wake under the lock the wake needs. A
// coalescing wake decides from the agent's other queued runs, so it takes
// the agent's write lock (two wakes must not both see "none queued"). Any
// other wake needs only a stable status and budget: a shared lock
// (store.AgentShared). A repeated idempotency key is then found by
// InsertRun's conflict, which returns the earlier run.
func (s *Service) lockForWake(ctx context.Context, tx *sql.Tx, agentID string, coalescing bool) (domain.Agent, error) {
	if !coalescing {
		return s.st.AgentShared(ctx, tx, agentID)
	}
	if err := s.st.LockAgent(ctx, tx, agentID); err != nil {
		return domain.Agent{}, err
	}
	return s.st.GetAgent(ctx, tx, agentID)
}

func actorKind(k string) string {
	if k == "" {
		return "system"
	}
	return k
}

// issueReads reads tasks inside one transaction, each at most once: a wake
// checks the same task for its company, its isolation and its state guard,
// and each read is a round trip.
type issueReads struct {
	st   *store.Store
	q    *sql.Tx
	seen map[string]domain.Issue
}

func (r *issueReads) get(ctx context.Context, id string) (domain.Issue, error) {
	if is, ok := r.seen[id]; ok {
		return is, nil
	}
	is, err := r.st.GetIssue(ctx, r.q, id)
	if err != nil {
		return is, err
	}
	if r.seen == nil {
		r.seen = map[string]domain.Issue{}
	}
	r.seen[id] = is
	return is, nil
}

// refusal returns why agent may not run (on issueID, optional) now, or "".
func (s *Service) refusal(ctx context.Context, issues *issueReads, agent domain.Agent, issueID string, guard *domain.IssueStateGuard) (string, error) {
	switch agent.Status {
	case domain.AgentActive:
	case domain.AgentPaused:
		return RefusedAgentPaused, nil
	case domain.AgentTerminated:
		return RefusedAgentTerminated, nil
	default:
		return RefusedAgentNotActive, nil
	}
	if agent.OverBudget(s.st.Now()) {
		return RefusedBudgetExceeded, nil
	}
	if reason, err := s.sandboxRefusal(ctx, issues, agent, issueID); reason != "" || err != nil {
		return reason, err
	}
	if guard != nil && guard.IssueID != "" {
		issue, err := issues.get(ctx, guard.IssueID)
		if errors.Is(err, store.ErrNotFound) {
			return RefusedIssueMissing, nil
		}
		if err != nil {
			return "", err
		}
		if len(guard.Statuses) > 0 && !slices.Contains(guard.Statuses, issue.Status) {
			return RefusedIssueState, nil
		}
		if guard.RequireAssignment && issue.AssigneeAgentID != agent.ID {
			return RefusedIssueState, nil
		}
	}
	return "", nil
}

// AuthenticateToken resolves a run-scoped token to its running run and
// agent; tokens of runs that are not running are rejected.
func (s *Service) AuthenticateToken(ctx context.Context, token string) (domain.Run, domain.Agent, error) {
	run, err := s.st.RunByTokenHash(ctx, s.st.DB, store.HashToken(token))
	if err != nil {
		return domain.Run{}, domain.Agent{}, authz.ErrUnauthenticated
	}
	agent, err := s.st.GetAgent(ctx, s.st.DB, run.AgentID)
	if err != nil {
		return domain.Run{}, domain.Agent{}, authz.ErrUnauthenticated
	}
	return run, agent, nil
}
