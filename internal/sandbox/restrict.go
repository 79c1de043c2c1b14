package sandbox

import (
	"context"
	"net/http"
)

// Restriction is attached to a /mcp request that came through a run's
// bridge: the MCP server must then give the run no more than the bridge
// does. API is the bridge's own allowlisted handler (forwarding as the
// run); Publications resolves a send's task.
type Restriction struct {
	Grant        Grant
	API          http.Handler
	Publications PublicationTask
}

type restrictionKey struct{}

func withRestriction(ctx context.Context, r Restriction) context.Context {
	return context.WithValue(ctx, restrictionKey{}, r)
}

// RestrictionFrom returns the restriction of a request that came through
// a sandbox bridge. Only the bridge sets it, in process; nothing a client
// sends can.
func RestrictionFrom(ctx context.Context) (Restriction, bool) {
	r, ok := ctx.Value(restrictionKey{}).(Restriction)
	return r, ok
}

// OwnPublication reports whether a send belongs to the restricted run's
// own task (fails closed without a lookup).
func (r Restriction) OwnPublication(ctx context.Context, publicationID string) bool {
	if r.Publications == nil || r.Grant.TaskID == "" {
		return false
	}
	company, task, err := r.Publications(ctx, publicationID)
	return err == nil && company == r.Grant.CompanyID && task == r.Grant.TaskID
}
