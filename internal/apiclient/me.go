package apiclient

import (
	"context"

	"github.com/paperclipai/paperclipai/internal/api"
)

// MeWithCompanies reads GET /me?include=companies: the calling board
// actor and the companies it sees with its role in each (Me.Companies),
// in one call.
func (c *Client) MeWithCompanies(ctx context.Context) (api.Me, error) {
	return get[api.Me](ctx, c, "/me?include=companies")
}
