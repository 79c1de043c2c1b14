package api

import (
	"context"
	"net/http"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/httpx"
	"github.com/paperclipai/paperclipai/internal/store"
)

// The keyset-paged array listings (docs/api.md, "Paging"): the body stays
// a JSON array; the next page is in the Link and X-Next-Cursor headers.

// companyPage serves a GET route listing one page of a company's rows to
// anyone with read access to the company; key is a row's cursor.
func companyPage[T any](s *Server, list func(ctx context.Context, q db.Querier, companyID string, p store.Page) ([]T, error),
	key func(T) store.Cursor) httpx.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		companyID, _, err := s.companyAccess(r, false)
		if err != nil {
			return err
		}
		p, err := httpx.PageParams(r)
		if err != nil {
			return err
		}
		rows, err := list(r.Context(), s.Store.DB, companyID, p)
		if err != nil {
			return err
		}
		items, next := httpx.TrimPage(rows, p, key)
		httpx.WritePage(w, r, items, next)
		return nil
	}
}

// The cursors of the array listings here: a row's creation time and id.

func agentCursor(a domain.Agent) store.Cursor {
	return store.Cursor{At: a.CreatedAt, ID: a.ID}
}

func projectCursor(p domain.Project) store.Cursor {
	return store.Cursor{At: p.CreatedAt, ID: p.ID}
}

func environmentCursor(e domain.Environment) store.Cursor {
	return store.Cursor{At: e.CreatedAt, ID: e.ID}
}

func policyCursor(p domain.ActionPolicy) store.Cursor {
	return store.Cursor{At: p.CreatedAt, ID: p.ID}
}

func companyCursor(c domain.Company) store.Cursor {
	return store.Cursor{At: c.CreatedAt, ID: c.ID}
}

func boardKeyCursor(k domain.BoardAPIKey) store.Cursor {
	return store.Cursor{At: k.CreatedAt, ID: k.ID}
}

func secretCursor(s domain.Secret) store.Cursor {
	return store.Cursor{At: s.CreatedAt, ID: s.ID}
}

// writeListPage answers an array listing from rows fetched with one row
// more than the page p (see store.TrimPage).
func writeListPage[T any](w http.ResponseWriter, r *http.Request, rows []T, p store.Page, key func(T) store.Cursor) {
	items, next := httpx.TrimPage(rows, p, key)
	httpx.WritePage(w, r, items, next)
}

func (s *Server) listComments(w http.ResponseWriter, r *http.Request) error {
	issue, err := s.loadIssue(r, s.Store.DB, false)
	if err != nil {
		return err
	}
	p, err := httpx.PageParams(r)
	if err != nil {
		return err
	}
	rows, err := s.Store.ListCommentsPage(r.Context(), s.Store.DB, issue.ID, p)
	if err != nil {
		return err
	}
	items, next := httpx.TrimPage(rows, p, func(c domain.Comment) store.Cursor { return store.Cursor{At: c.CreatedAt, ID: c.ID} })
	httpx.WritePage(w, r, items, next)
	return nil
}

func (s *Server) listAttachments(w http.ResponseWriter, r *http.Request) error {
	issue, err := s.loadIssue(r, s.Store.DB, false)
	if err != nil {
		return err
	}
	p, err := httpx.PageParams(r)
	if err != nil {
		return err
	}
	rows, err := s.Store.ListAttachmentsPage(r.Context(), s.Store.DB, issue.ID, p)
	if err != nil {
		return err
	}
	items, next := httpx.TrimPage(rows, p, func(a domain.Attachment) store.Cursor { return store.Cursor{At: a.CreatedAt, ID: a.ID} })
	httpx.WritePage(w, r, items, next)
	return nil
}

func (s *Server) listMembers(w http.ResponseWriter, r *http.Request) error {
	_, companyID, _, err := s.boardCompany(r, false)
	if err != nil {
		return err
	}
	p, err := httpx.PageParams(r)
	if err != nil {
		return err
	}
	rows, err := s.Store.ListMembersPage(r.Context(), s.Store.DB, companyID, p)
	if err != nil {
		return err
	}
	items, next := httpx.TrimPage(rows, p, func(m domain.Membership) store.Cursor { return store.Cursor{At: m.CreatedAt, ID: m.UserID} })
	httpx.WritePage(w, r, items, next)
	return nil
}
