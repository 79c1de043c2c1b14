package outbound

import (
	"context"
	"errors"
	"net/http"

	"github.com/paperclipai/paperclipai/internal/httpx"
	"github.com/paperclipai/paperclipai/internal/store"
)

// taskRef lets a company task route take the task's short identifier
// (ACME-12) wherever it takes the task's UUID: the identifier is looked up
// in the path's company, after the caller's access to that company is
// checked (so an outsider cannot probe which identifiers exist), and the
// path value is replaced by the UUID before next runs.
func (s *Service) taskRef(next httpx.HandlerFunc) httpx.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		v := r.PathValue("issueId")
		if !store.IssueIdentifierPattern.MatchString(v) {
			return next(w, r)
		}
		companyID, err := s.companyAccess(r, false)
		if err != nil {
			return err
		}
		id, err := s.TaskRef(r.Context(), companyID, v)
		if err != nil {
			return err
		}
		r.SetPathValue("issueId", id)
		return next(w, r)
	}
}

// TaskRef resolves a task reference of an email request in the company
// (store.ResolveIssueRef): the task's UUID, returned unchanged, or its
// short identifier (ACME-12) there, returned as the UUID. An identifier
// with no task in this company is 404 (never another company's task); a
// value of neither shape is returned unchanged for the request's own
// validation to refuse.
func (s *Service) TaskRef(ctx context.Context, companyID, ref string) (string, error) {
	id, err := s.Store.ResolveIssueRef(ctx, s.Store.DB, companyID, ref)
	if errors.Is(err, store.ErrBadIssueRef) {
		return ref, nil
	}
	if errors.Is(err, store.ErrNotFound) {
		return "", &httpx.Error{Status: http.StatusNotFound, Message: "Email task not found"}
	}
	return id, err
}
