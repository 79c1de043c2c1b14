package api

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/httpx"
	"github.com/paperclipai/paperclipai/internal/store"
)

// Task references at the API's edge: a task is named by its UUID or by its
// short identifier in the company (ACME-12), in paths (loadIssue), query
// filters and request bodies alike; each resolves through
// store.ResolveIssueRef to the UUID before the handler goes on.

// queryIssueRef reads an optional task reference query parameter of a
// company route: the task's UUID or its short identifier (ACME-12) in the
// company, returned as the UUID.
func (s *Server) queryIssueRef(r *http.Request, companyID, name string) (string, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return "", nil
	}
	id, err := s.Store.ResolveIssueRef(r.Context(), s.Store.DB, companyID, v)
	if errors.Is(err, store.ErrNotFound) {
		return "", httpx.Errorf(http.StatusNotFound, "%s: no task %s in this company", name, strings.ToUpper(v))
	}
	if errors.Is(err, store.ErrBadIssueRef) {
		return "", httpx.Errorf(http.StatusBadRequest, "invalid %s: %v", name, err)
	}
	return id, err
}

// bodyIssueRef resolves a task reference of a request body (field name) in
// the company: the task's UUID or its short identifier (ACME-12), returned
// as the UUID. An identifier of another company is "not found", never that
// company's task. The task of a UUID is not read here: callers load it and
// check its company as before.
func (s *Server) bodyIssueRef(ctx context.Context, q db.Querier, companyID, name, ref string) (string, error) {
	id, err := s.Store.ResolveIssueRef(ctx, q, companyID, ref)
	if errors.Is(err, store.ErrNotFound) {
		return "", httpx.Errorf(http.StatusBadRequest, "%s: task not found in this company", name)
	}
	if errors.Is(err, store.ErrBadIssueRef) {
		return "", httpx.Errorf(http.StatusBadRequest, "invalid %s: %v", name, err)
	}
	return id, err
}
