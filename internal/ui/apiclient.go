package ui

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/paperclipai/paperclipai/internal/api"
	"github.com/paperclipai/paperclipai/internal/apiclient"
	"github.com/paperclipai/paperclipai/internal/authz"
)

// APIError is an API answer with status ≥ 400, as the UI shows it.
type APIError struct {
	Status     int
	Message    string
	Code       string
	Details    map[string]any
	RetryAfter time.Duration
	RequestID  string
	// Refused is set for a permission refusal shown inside a form: "You
	// don’t have permission to {action}.", with the API's Reason under it.
	Refused, Reason string
}

func (e *APIError) Error() string { return e.Message }

// acting returns ctx carrying a as the API's preset actor: the API then
// skips its own authentication and tags the request as in-process.
func acting(ctx context.Context, a authz.Actor) context.Context { return api.WithPresetActor(ctx, a) }

// uiError converts an apiclient error into the UI's APIError (nil for nil).
func uiError(err error) *APIError {
	if err == nil {
		return nil
	}
	var ae *apiclient.Error
	if errors.As(err, &ae) {
		return &APIError{Status: ae.Status, Message: ae.Message, Code: ae.Code, Details: ae.Details,
			RetryAfter: ae.RetryAfter, RequestID: ae.RequestID}
	}
	return &APIError{Status: http.StatusInternalServerError, Message: fmt.Sprintf("unexpected API answer: %v", err)}
}

// callAPI dispatches one request to the API handler in-process through
// the client's untyped path call, with the actor preset, and decodes a
// JSON answer into out (when not nil). in is JSON-encoded when not nil.
// Every page calls a typed method (c.cl()) instead; this stays for a route
// the client has no method for yet.
func (u *UI) callAPI(ctx context.Context, a authz.Actor, method, path string, in, out any) *APIError {
	return uiError(u.client.Do(acting(ctx, a), method, path, in, out))
}

// cl is the typed API client; its calls need a context from c.ctx() (or
// acting) to act as the request's actor.
func (c *rc) cl() *apiclient.Client { return c.u.client }

// ctx is the request's context with its actor preset for the API.
func (c *rc) ctx() context.Context { return acting(c.r.Context(), c.actor) }

// check converts a typed call's error into the UI's APIError, naming a
// permission refusal's action like c.api does.
func (c *rc) check(err error) *APIError {
	e := uiError(err)
	c.nameRefusal(e)
	return e
}

// apiAll reads every page of an array listing at path into out, through
// the client's untyped path call: the escape hatch of c.api for a listing
// the typed client has no method for yet.
func apiAll[T any](c *rc, path string, out *[]T) *APIError {
	return all(c, apiclient.ListAt[T](c.cl(), path), nil, out)
}

// all reads every page of a typed listing as the request's actor: the
// pages that show a whole list (members, agents, inboxes) follow the
// cursors rather than stop at the first page.
func all[T any](c *rc, l apiclient.List[T], q url.Values, out *[]T) *APIError {
	rows, err := l.All(c.ctx(), q)
	if e := c.check(err); e != nil {
		return e
	}
	*out = rows
	return nil
}

// into returns the receiver of a typed call's two results: it stores the
// answer in out on success and returns the call's error as the UI shows it
// (see check). Use: e := into(c, &co)(c.cl().Company(c.ctx(), id)).
func into[T any](c *rc, out *T) func(T, error) *APIError {
	return func(v T, err error) *APIError {
		if e := c.check(err); e != nil {
			return e
		}
		*out = v
		return nil
	}
}

// page reads one page of a typed listing into out as the request's actor
// and returns the next page's cursor.
func page[T any](c *rc, l apiclient.List[T], q url.Values, out *[]T) (string, *APIError) {
	rows, next, err := l.Page(c.ctx(), q)
	if e := c.check(err); e != nil {
		return "", e
	}
	*out = rows
	return next, nil
}

// opt is a PATCH-style field: nil (left out) when v is empty.
func opt(v string) *string {
	if v == "" {
		return nil
	}
	return &v
}
