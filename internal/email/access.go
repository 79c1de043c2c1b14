package email

import (
	"context"

	"github.com/paperclipai/paperclipai/internal/authz"
)

// RequireConnectionManager checks that the actor manages the company's
// email connections (a board user with tools:manage_connections, the
// local board or an instance administrator): the rule of the inbox
// control and send-resolution routes, for routes of other packages.
func (s *Service) RequireConnectionManager(ctx context.Context, a authz.Actor, companyID string) error {
	return s.requireManager(ctx, s.Store.DB, a, companyID, "")
}
