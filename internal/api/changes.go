package api

import (
	"net/http"

	"github.com/paperclipai/paperclipai/internal/httpx"
)

// changes serves GET /api/companies/{companyId}/changes: opaque
// fingerprints of the company's tasks, runs and email conversations
// (board actors), which a client polls cheaply to learn what changed. The
// web UI's event stream is built on it.
func (s *Server) changes(w http.ResponseWriter, r *http.Request) error {
	_, companyID, _, err := s.boardCompany(r, false)
	if err != nil {
		return err
	}
	out, err := s.Store.CompanyChangeStamps(r.Context(), s.Store.DB, companyID)
	return httpx.Respond(w, http.StatusOK, out, err)
}
