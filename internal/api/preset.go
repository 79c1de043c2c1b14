package api

import (
	"context"

	"github.com/paperclipai/paperclipai/internal/authz"
)

type presetKey struct{}

// WithPresetActor returns ctx carrying an actor that the API middleware uses
// instead of authenticating the request. Only in-process callers (the web
// UI, which resolved the actor from its own session) can set it: a context
// value never comes from the network.
func WithPresetActor(ctx context.Context, a authz.Actor) context.Context {
	return context.WithValue(ctx, presetKey{}, a)
}

func presetActor(ctx context.Context) (authz.Actor, bool) {
	a, ok := ctx.Value(presetKey{}).(authz.Actor)
	return a, ok
}
