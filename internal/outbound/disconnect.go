package outbound

import (
	"context"
	"database/sql"

	"github.com/paperclipai/paperclipai/internal/domain"
)

// The errors of sends ended because their inbox was disconnected.
const (
	disconnectedNeverMsg = "The inbox was disconnected before this email was sent. A new explicit send is required."
	// The inbox's keys are gone with the disconnect, so Paperclip cannot
	// ask the provider; an operator can (docs/email-pipeline.md).
	disconnectedInDoubtMsg = "The inbox was disconnected while this email may have been sent. Check AgentMail before resolving this delivery."
)

// SettleDisconnected ends the unfinished sends of a disconnected inbox
// inside tx (docs/email-pipeline.md, "Sends of a disconnected inbox"): a
// send never attempted fails, a send that may have reached the provider
// becomes uncertain for a connection manager to resolve. The email
// service calls it in the transaction that archives the inbox; the worker
// calls it for any archived inbox still holding sends.
func (s *Service) SettleDisconnected(ctx context.Context, tx *sql.Tx, endpointID string) error {
	settled, err := s.Store.SettleDisconnectedSends(ctx, tx, endpointID, disconnectedNeverMsg, disconnectedInDoubtMsg)
	if err != nil {
		return err
	}
	for _, p := range settled {
		action, msg := "email.failed", disconnectedNeverMsg
		if p.Outcome == domain.OutcomeUncertain {
			action, msg = "email.uncertain", disconnectedInDoubtMsg
		}
		if err := s.Store.Audit(ctx, tx, systemActor.AuditActor(), p.CompanyID, action, "email_publication", p.ID,
			map[string]any{"error": msg}); err != nil {
			return err
		}
		if p.Outcome != p.From {
			s.Metrics.Sends.WithLabelValues(string(p.Outcome)).Inc()
		}
	}
	return nil
}

// settleArchived settles the sends of an archived inbox that the worker
// found still pending (a disconnect settles them itself; this covers sends
// left by an older version, say).
func (w *Worker) settleArchived(ctx context.Context, endpointID string) error {
	return w.Store.Tx(ctx, func(tx *sql.Tx) error { return w.SettleDisconnected(ctx, tx, endpointID) })
}
