package outbound

import (
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
		found, err := s.Store.IssuesByIdentifier(r.Context(), s.Store.DB, companyID, v)
		if err != nil {
			return err
		}
		if len(found) == 0 {
			return &httpx.Error{Status: http.StatusNotFound, Message: "Email task not found"}
		}
		r.SetPathValue("issueId", found[0].ID)
		return next(w, r)
	}
}
