package outbound

import (
	"context"
	"errors"

	"github.com/paperclipai/paperclipai/internal/store"
)

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
		return "", notFound("Email task not found")
	}
	return id, err
}
