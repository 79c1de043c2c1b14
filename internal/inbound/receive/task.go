package receive

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/paperclipai/paperclipai/internal/agentmail"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/store"
)

// reopen applies the reopen rule to a done task that an eligible reply
// arrived for, and returns the task's status afterwards: todo, or still
// done when the reopen limiter refuses (docs/email-pipeline.md, "The reopen limiter": a
// conversation that keeps bouncing between an agent's "done" and replies,
// such as a loop with an autoresponder our classifier does not recognise,
// must not reopen and wake without bound). At most ReopenLimit reopens by
// inbound mail are allowed per task within ReopenWindow; beyond that the
// mail is still retained, the task stays done, and a system comment says
// why, once per limited episode (until the next real reopen).
func (rv *Receiver) reopen(ctx context.Context, tx *sql.Tx, ep domain.EmailEndpoint, issueID string) (string, error) {
	since := rv.st.Now().Add(-rv.t.ReopenWindow)
	n, err := rv.st.CountIssueActivity(ctx, tx, ep.CompanyID, issueID, auditActor, actionReopened, since)
	if err != nil {
		return "", err
	}
	if n >= rv.t.ReopenLimit {
		noted, err := rv.st.IssueActivitySinceLast(ctx, tx, ep.CompanyID, issueID, auditActor, actionReopenLimited, actionReopened, since)
		if err != nil {
			return "", err
		}
		if !noted {
			c := domain.Comment{CompanyID: ep.CompanyID, IssueID: issueID, AuthorKind: "system",
				Body: fmt.Sprintf("This task was reopened by email replies %d times within %s, the most allowed. "+
					"Further replies are kept on the task without reopening it or waking the agent until that rate drops; "+
					"reopen it by hand to act on them now.", n, windowText(rv.t.ReopenWindow))}
			if err := rv.st.CreateComment(ctx, tx, &c); err != nil {
				return "", err
			}
			if err := rv.st.Audit(ctx, tx, auditBy(ep), ep.CompanyID, actionReopenLimited, "issue", issueID, map[string]any{"reason": "email_received",
				"reopens": n, "limit": rv.t.ReopenLimit, "windowSeconds": int64(rv.t.ReopenWindow / time.Second), "commentId": c.ID}); err != nil {
				return "", err
			}
		}
		return domain.IssueDone, nil
	}
	ok, err := rv.st.ReopenDoneIssue(ctx, tx, issueID)
	if err != nil {
		return "", err
	}
	if !ok {
		// The task left done between the read and the update: decide on
		// its current state under the row lock.
		status, _, err := rv.st.LockIssueStatus(ctx, tx, issueID)
		if err != nil || status != domain.IssueDone {
			return status, err
		}
		if err := rv.st.SetIssueStatus(ctx, tx, issueID, domain.IssueTodo); err != nil {
			return "", err
		}
	}
	if err := rv.st.Audit(ctx, tx, auditBy(ep), ep.CompanyID, actionReopened, "issue", issueID, map[string]any{"reason": "email_received"}); err != nil {
		return "", err
	}
	return domain.IssueTodo, nil
}

// Audit actions and actor of the reopen rule.
const (
	auditActor          = "agentmail"
	actionReopened      = "issue.reopened"
	actionReopenLimited = "issue.reopen_limited"
)

// windowText renders a reopen window for people: "1 hour", "30 minutes".
func windowText(d time.Duration) string {
	if d < time.Minute || (d%time.Minute != 0 && d%time.Hour != 0) {
		return d.String()
	}
	unit, n := "minute", int64(d/time.Minute)
	if d%time.Hour == 0 {
		unit, n = "hour", int64(d/time.Hour)
	}
	if n == 1 {
		return "1 " + unit
	}
	return fmt.Sprintf("%d %ss", n, unit)
}

// createTask creates the task and the conversation of a new provider
// thread: assigned to the inbox's agent, with no sender identity, placed
// inside the low-trust boundary (and isolated) for low-trust agents.
//
// The task is created unnumbered: cur numbers the transaction's new tasks
// just before it commits (txInbox.numberTasks, store.CreateIssueUnnumbered
// says why), with its audit entry and the conversation
// (store.CreateConversationTask). status is the task's status when this
// call created both the task and the conversation on it (todo), "" when
// either existed already and the caller must read it.
func (rv *Receiver) createTask(ctx context.Context, tx *sql.Tx, cur *txInbox, ep domain.EmailEndpoint, msg *agentmail.Message) (conv domain.EmailConversation, status string, err error) {
	// The agent is read once per transaction: its placement rule is the
	// same for every new thread the transaction creates (as for the
	// sender rules, txInbox.senderRules).
	if cur.agent == nil || cur.agent.ID != ep.AssignedAgentID {
		ag, err := rv.st.GetAgent(ctx, tx, ep.AssignedAgentID)
		if err != nil {
			return domain.EmailConversation{}, "", err
		}
		cur.agent = &ag
	}
	ag := *cur.agent
	subject := msg.SubjectOrDefault()
	issue := domain.Issue{CompanyID: ep.CompanyID, Title: truncateRunes(subject, 200), Status: domain.IssueTodo,
		Priority: "medium", AssigneeAgentID: ep.AssignedAgentID, OriginKind: "chat_channel", OriginID: "email:" + ep.ID + ":" + msg.ThreadID,
		// The idempotency key makes the task unique per (inbox, thread)
		// even if two transactions ever raced past the thread lease.
		IdempotencyKey:    "email:" + ep.ID + ":" + msg.ThreadID,
		ResponsibleUserID: ep.SponsorUserID,
		Description:       "Email conversation received at " + ep.Address + ". The messages are in the comments."}
	if ag.Permissions.TrustPreset == domain.TrustLowTrustReview {
		pl, err := rv.o.Email.LowTrustPlacement(ctx, tx, ag)
		if err != nil {
			return domain.EmailConversation{}, "", err
		}
		issue.ParentID, issue.ProjectID = pl.ParentID, pl.ProjectID
		issue.ExecutionWorkspaceSettings = json.RawMessage(`{"mode":"isolated_workspace"}`)
	}
	conv = domain.EmailConversation{CompanyID: ep.CompanyID, EndpointID: ep.ID,
		ExternalConversationID: ep.Address, ExternalThreadID: msg.ThreadID, Subject: subject, State: "active"}
	// The task, its audit entry and the conversation: one round trip on
	// PostgreSQL.
	created, convCreated, err := rv.st.CreateConversationTask(ctx, tx, &issue, func(i domain.Issue) (*domain.Activity, error) {
		return store.AuditEntry(auditBy(ep), ep.CompanyID, "issue.created", "issue", i.ID, map[string]any{"source": "email"})
	}, &conv)
	if err != nil {
		return domain.EmailConversation{}, "", err
	}
	if created {
		cur.unnumbered = append(cur.unnumbered, issue.ID)
	}
	if created && convCreated {
		// Both rows are this transaction's own: the task's status is the
		// one it was inserted with, and reading it back is a round trip.
		status = issue.Status
	}
	return conv, status, nil
}

// auditBy is the audit actor of the receiving pipeline's own actions on an
// inbox: the system name "agentmail" on behalf of the inbox's agent.
func auditBy(ep domain.EmailEndpoint) domain.ActivityActor {
	return domain.SystemActor(auditActor, ep.AssignedAgentID)
}
