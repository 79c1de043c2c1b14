// Package authz holds the request actor and the authorization rules of the
// control plane: company isolation, role checks, agent trust boundaries and
// run-bound agent authority.
package authz

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/store"
)

// ErrUnauthenticated means the request carried no valid credential (401).
var ErrUnauthenticated = errors.New("authentication required")

// ErrForbidden means the actor is known but may not do this (403).
var ErrForbidden = errors.New("forbidden")

// Actor kinds.
const (
	KindBoard = "board"
	KindAgent = "agent"
)

// Actor is who a request acts as.
type Actor struct {
	Kind string
	// Board actors.
	UserID          string
	IsInstanceAdmin bool
	LocalBoard      bool
	// KeyCompanyID limits a company-scoped board key to one company.
	KeyCompanyID string
	// Agent actors: the agent and the run whose token was presented.
	Agent *domain.Agent
	Run   *domain.Run
	// RunHeaderMatches is true when X-Paperclip-Run-Id named the token's run.
	RunHeaderMatches bool
}

// AgentID returns the acting agent's id, or "".
func (a Actor) AgentID() string {
	if a.Agent == nil {
		return ""
	}
	return a.Agent.ID
}

// RunID returns the acting run's id, or "".
func (a Actor) RunID() string {
	if a.Run == nil {
		return ""
	}
	return a.Run.ID
}

// ID returns the actor's audit id (user id or agent id).
func (a Actor) ID() string {
	if a.Kind == KindAgent {
		return a.AgentID()
	}
	return a.UserID
}

// AuditActor is the actor as an audit-log entry records it; an actor with
// no kind (a background worker) is the system.
func (a Actor) AuditActor() domain.ActivityActor {
	kind := a.Kind
	if kind == "" {
		kind = "system"
	}
	return domain.ActivityActor{Kind: kind, ID: a.ID(), AgentID: a.AgentID(), RunID: a.RunID()}
}

type ctxKey struct{}

// WithActor returns ctx carrying a.
func WithActor(ctx context.Context, a Actor) context.Context {
	return context.WithValue(ctx, ctxKey{}, a)
}

// FromContext returns the actor in ctx.
func FromContext(ctx context.Context) (Actor, bool) {
	a, ok := ctx.Value(ctxKey{}).(Actor)
	return a, ok
}

// Service answers authorization questions against the store.
type Service struct {
	Store *store.Store
}

// Access is what an actor may do in one company.
type Access struct {
	CompanyID   string
	Role        string
	Permissions []string
}

// CompanyAccess checks that the actor may see (write=false) or change
// (write=true) companyID. Another company's resources answer ErrNotFound so
// their existence does not leak.
func (s *Service) CompanyAccess(ctx context.Context, q db.Querier, a Actor, companyID string, write bool) (Access, error) {
	notFound := &store.NotFoundError{Op: "company", What: "company"}
	switch a.Kind {
	case KindAgent:
		if a.Agent == nil || a.Agent.CompanyID != companyID {
			return Access{}, notFound
		}
		if write && !a.RunHeaderMatches {
			return Access{}, fmt.Errorf("%w: agent writes must carry X-Paperclip-Run-Id of the token's run", ErrForbidden)
		}
		return Access{CompanyID: companyID, Role: "agent"}, nil
	case KindBoard:
		if a.KeyCompanyID != "" && a.KeyCompanyID != companyID {
			return Access{}, notFound
		}
		if _, err := s.Store.GetCompany(ctx, q, companyID); err != nil {
			return Access{}, err
		}
		if a.LocalBoard || a.IsInstanceAdmin {
			return Access{CompanyID: companyID, Role: domain.RoleOwner}, nil
		}
		m, err := s.Store.GetMembership(ctx, q, companyID, a.UserID)
		if errors.Is(err, store.ErrNotFound) {
			return Access{}, notFound
		}
		if err != nil {
			return Access{}, err
		}
		if write && m.Role == domain.RoleViewer {
			return Access{}, fmt.Errorf("%w: viewers have read-only access", ErrForbidden)
		}
		return Access{CompanyID: companyID, Role: m.Role, Permissions: m.Permissions}, nil
	}
	return Access{}, ErrUnauthenticated
}

// RequireBoard refuses agent actors (403): some operations are for humans only.
func RequireBoard(a Actor) error {
	if a.Kind != KindBoard {
		return fmt.Errorf("%w: this operation requires a board user", ErrForbidden)
	}
	return nil
}

// RequireRole checks a board actor's role in the company is one of roles.
func RequireRole(acc Access, roles ...string) error {
	if slices.Contains(roles, acc.Role) {
		return nil
	}
	return fmt.Errorf("%w: requires role %v", ErrForbidden, roles)
}

// HasPermission reports whether the access carries a named permission;
// owners and admins hold every permission.
func HasPermission(acc Access, perm string) bool {
	if acc.Role == domain.RoleOwner || acc.Role == domain.RoleAdmin {
		return true
	}
	return slices.Contains(acc.Permissions, perm)
}

// RequireInstanceAdmin allows only instance administrators (the local board
// in local_trusted mode is one).
func RequireInstanceAdmin(a Actor) error {
	if a.Kind == KindBoard && (a.LocalBoard || a.IsInstanceAdmin) && a.KeyCompanyID == "" {
		return nil
	}
	return fmt.Errorf("%w: requires an instance administrator", ErrForbidden)
}

// CanReadIssue checks that the actor may read the task: company access and,
// for a low-trust agent, the task lying inside its trust boundary.
func (s *Service) CanReadIssue(ctx context.Context, q db.Querier, a Actor, issue domain.Issue) error {
	if _, err := s.CompanyAccess(ctx, q, a, issue.CompanyID, false); err != nil {
		return err
	}
	if a.Kind != KindAgent {
		return nil
	}
	if issue.AssigneeAgentID == a.AgentID() {
		return nil
	}
	ok, err := s.WithinBoundary(ctx, q, *a.Agent, issue)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: task is outside the agent's trust boundary", ErrForbidden)
	}
	return nil
}

// CanWriteIssue checks that the actor may change the task (comment, update,
// attach). An agent may write only tasks assigned to it, with its run header.
func (s *Service) CanWriteIssue(ctx context.Context, q db.Querier, a Actor, issue domain.Issue) error {
	if _, err := s.CompanyAccess(ctx, q, a, issue.CompanyID, true); err != nil {
		return err
	}
	if a.Kind == KindAgent && issue.AssigneeAgentID != a.AgentID() {
		return fmt.Errorf("%w: the task is not assigned to this agent", ErrForbidden)
	}
	return nil
}

// WithinBoundary reports whether issue lies inside the agent's trust
// boundary. Standard agents (and low-trust agents without a boundary) see
// the whole company.
func (s *Service) WithinBoundary(ctx context.Context, q db.Querier, agent domain.Agent, issue domain.Issue) (bool, error) {
	b := agent.Permissions.Boundary()
	if agent.Permissions.TrustPreset != domain.TrustLowTrustReview || b == nil {
		return true, nil
	}
	if b.CompanyID != "" && b.CompanyID != issue.CompanyID {
		return false, nil
	}
	if len(b.ProjectIDs) > 0 && issue.ProjectID != "" && slices.Contains(b.ProjectIDs, issue.ProjectID) {
		return true, nil
	}
	if b.RootIssueID != "" {
		if issue.ID == b.RootIssueID {
			return true, nil
		}
		anc, err := s.Store.IssueAncestors(ctx, q, issue.ID)
		if err != nil {
			return false, err
		}
		if slices.Contains(anc, b.RootIssueID) {
			return true, nil
		}
	}
	return len(b.ProjectIDs) == 0 && b.RootIssueID == "", nil
}
