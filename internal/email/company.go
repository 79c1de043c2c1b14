package email

import (
	"context"

	"github.com/paperclipai/paperclipai/internal/authz"
	"github.com/paperclipai/paperclipai/internal/domain"
)

// DisconnectCompany disconnects every inbox of a company that is being
// deleted, each as Control's "remove" does: receiving stops (the inbound
// worker closes the inbox's socket at its next rescan, which the change
// signal starts at once), Paperclip's own webhook and runtime key are
// removed at the provider, and queued sends are settled. The provider
// inboxes themselves are kept. The caller has already checked that a may
// delete the company (an owner), which an inbox manager's permission is
// not needed for. An inbox busy with an email operation answers the
// work-lease refusal ("retry shortly"); inboxes disconnected before it
// stay disconnected.
func (s *Service) DisconnectCompany(ctx context.Context, a authz.Actor, companyID string) error {
	eps, err := s.Store.ListEndpoints(ctx, s.Store.DB, companyID)
	if err != nil {
		return err
	}
	defer s.changed()
	for _, ep := range eps {
		err := s.withWorkLease(ctx, ep, "An email operation is running; retry shortly", func() error {
			cur, err := s.Store.GetEndpoint(ctx, s.Store.DB, ep.ID)
			if err != nil || cur.Status == domain.EndpointArchived {
				return err
			}
			return s.remove(ctx, a, &cur)
		})
		if err != nil {
			return err
		}
	}
	return nil
}
