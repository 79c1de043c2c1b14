package email

import (
	"context"
	"errors"

	"github.com/paperclipai/paperclipai/internal/authz"
	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/store"
)

// Sender is who asked for a send, as stored with the send's intent: a
// board user (LocalImplicit for the local board) or an agent in a run. The
// send worker re-authorizes every attempt with it.
type Sender struct {
	UserID        string `json:"userId,omitempty"`
	AgentID       string `json:"agentId,omitempty"`
	RunID         string `json:"runId,omitempty"`
	LocalImplicit bool   `json:"localImplicit,omitempty"`
}

// SenderOf returns the stored identity of a request actor.
func SenderOf(a authz.Actor) Sender {
	if a.Kind == authz.KindAgent {
		return Sender{AgentID: a.AgentID(), RunID: a.RunID()}
	}
	return Sender{UserID: a.UserID, LocalImplicit: a.LocalBoard}
}

func forbidden(msg string) error { return &domain.Refusal{Kind: domain.KindForbidden, Message: msg} }

// AuthorizeSend is the authority chain of a send from ep about task
// (docs/email-pipeline.md, "Who may send"). A board user needs a grant to
// the inbox's saved credential and company write access; an agent must be
// the inbox's and the task's assignee, active, within budget and within its
// trust boundary, acting in a run bound to the task. accepting=true (the
// request itself, not a later attempt) also requires that run to be
// running and to hold the task. A refusal is a *domain.Refusal; any other
// error means the check could not be made (it is never a refusal).
func (s *Service) AuthorizeSend(ctx context.Context, q db.Querier, by Sender, ep domain.EmailEndpoint, task domain.Issue, accepting bool) error {
	if task.CompanyID != ep.CompanyID {
		return &domain.Refusal{Kind: domain.KindNotFound, Message: "Task not found"}
	}
	switch {
	case by.UserID != "":
		if err := s.authorizeUser(ctx, q, by, ep); err != nil {
			return err
		}
	case by.AgentID != "":
	default:
		return forbidden("An authenticated actor is required")
	}
	if task.Status == domain.IssueCancelled {
		return forbidden("Cancelled tasks cannot send email")
	}
	if by.AgentID == "" {
		return nil
	}
	return s.authorizeAgent(ctx, q, by, ep, task, accepting)
}

// authorizeUser: a grant to the saved credential (the local board is
// exempt) and company write access.
func (s *Service) authorizeUser(ctx context.Context, q db.Querier, by Sender, ep domain.EmailEndpoint) error {
	if by.LocalImplicit {
		return nil
	}
	if ep.CredentialConnectionID != "" {
		grants, err := s.Store.ListEmailGrants(ctx, q, ep.CredentialConnectionID)
		if err != nil {
			return err
		}
		if !domain.GrantsAllow(grants, by.UserID) {
			return forbidden("You do not have access to this AgentMail credential")
		}
	}
	noAccess := forbidden("Board user no longer has company write access")
	u, err := s.Store.GetUser(ctx, q, by.UserID)
	if errors.Is(err, store.ErrNotFound) {
		return noAccess
	}
	if err != nil {
		return err
	}
	board := authz.Actor{Kind: authz.KindBoard, UserID: u.ID, IsInstanceAdmin: u.IsInstanceAdmin}
	_, err = s.Authz.CompanyAccess(ctx, q, board, ep.CompanyID, true)
	if errors.Is(err, store.ErrNotFound) || errors.Is(err, authz.ErrForbidden) {
		return noAccess
	}
	return err
}

// authorizeAgent: the assignee, active, within budget and boundary, in a
// run bound to the task.
func (s *Service) authorizeAgent(ctx context.Context, q db.Querier, by Sender, ep domain.EmailEndpoint, task domain.Issue, accepting bool) error {
	notAssigned := forbidden("Only the assigned agent can use this inbox for its tasks")
	if by.AgentID != ep.AssignedAgentID || task.AssigneeAgentID != by.AgentID {
		return notAssigned
	}
	unavailable := forbidden("Agent is not available to send email")
	ag, err := s.Store.GetAgent(ctx, q, by.AgentID)
	if errors.Is(err, store.ErrNotFound) {
		return unavailable
	}
	if err != nil {
		return err
	}
	ok, err := s.Authz.WithinBoundary(ctx, q, ag, task)
	if err != nil {
		return err
	}
	if !ok {
		return notAssigned
	}
	if ag.Status != domain.AgentActive || ag.OverBudget(s.Store.Now()) {
		return unavailable
	}
	if by.RunID == "" {
		return forbidden("An active task run is required to send email")
	}
	wrongRun := forbidden("Email action does not belong to this task run")
	run, err := s.Store.GetRun(ctx, q, by.RunID)
	if errors.Is(err, store.ErrNotFound) {
		return wrongRun
	}
	if err != nil {
		return err
	}
	if run.CompanyID != ep.CompanyID || run.AgentID != by.AgentID || run.IssueID != task.ID {
		return wrongRun
	}
	if accepting && (run.Status != domain.RunRunning || (task.ExecutionRunID != run.ID && task.CheckoutRunID != run.ID)) {
		return wrongRun
	}
	return nil
}
