package apiclient

import (
	"context"
	"net/http"

	"github.com/paperclipai/paperclipai/internal/domain"
)

// The routes whose first typed caller was the test kit's helpers.

// NewPolicy is POST /companies/{companyId}/action-policies' body: an
// allow or deny rule for an action, optionally rate-limited; an empty
// ActorKind is every actor ("*").
type NewPolicy struct {
	Action                 string `json:"action"`
	ActorKind              string `json:"actorKind,omitempty"`
	ActorID                string `json:"actorId,omitempty"`
	Effect                 string `json:"effect"`
	RateLimitCount         int    `json:"rateLimitCount,omitempty"`
	RateLimitWindowSeconds int    `json:"rateLimitWindowSeconds,omitempty"`
	Reason                 string `json:"reason,omitempty"`
}

// CreatePolicy sends POST /companies/{companyId}/action-policies.
func (c *Client) CreatePolicy(ctx context.Context, companyID string, in NewPolicy) (domain.ActionPolicy, error) {
	return send[domain.ActionPolicy](ctx, c, http.MethodPost, "/companies/"+esc(companyID)+"/action-policies", in)
}
