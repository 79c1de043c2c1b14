package api

import (
	"net/http"

	"github.com/paperclipai/paperclipai/internal/httpx"
	"github.com/paperclipai/paperclipai/internal/store"
)

// Route builders: the shape most JSON routes share (resolve the path and
// the actor's authority over it, read the body, call the service, answer)
// written once, so that a route states only what is its own. A refusal at
// any step is returned for writeError before anything is written.

// noBody is the input of a route that reads no request body, and the
// result of one that answers with none.
type noBody struct{}

// answer is how a route answers a success.
type answer struct {
	status int
	// private marks an answer that carries credential-derived data as not
	// cacheable (Cache-Control: no-store).
	private bool
}

// The answers of the routes built here. answerNoContent writes no body.
var (
	answerOK             = answer{status: http.StatusOK}
	answerOKPrivate      = answer{status: http.StatusOK, private: true}
	answerCreated        = answer{status: http.StatusCreated}
	answerCreatedPrivate = answer{status: http.StatusCreated, private: true}
	answerNoContent      = answer{status: http.StatusNoContent}
)

// opener resolves a route's path values (and the actor's authority over
// them) into the scope its service call needs. It runs before the body is
// read, so a bad id or a refusal wins over a bad body.
type opener[S any] func(r *http.Request) (S, error)

// jsonRoute builds a handler that runs open, strictly decodes the body
// into In (unless In is noBody), runs call and writes its result with ans.
func jsonRoute[S, In, Out any](s *Server, open opener[S], ans answer, call func(r *http.Request, scope S, in In) (Out, error)) httpx.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		scope, err := open(r)
		if err != nil {
			return err
		}
		var in In
		if _, none := any(in).(noBody); !none {
			if err := s.decodeJSON(w, r, &in); err != nil {
				return err
			}
		}
		out, err := call(r, scope, in)
		if err != nil {
			return err
		}
		if ans.private {
			noStore(w)
		}
		if ans.status == http.StatusNoContent {
			w.WriteHeader(http.StatusNoContent)
			return nil
		}
		httpx.WriteJSON(w, ans.status, out)
		return nil
	}
}

// pageRoute builds the handler of a paged array listing (docs/api.md,
// "Paging"): open, then the paging parameters, then list; the page is
// written with httpx.WritePage.
func pageRoute[S, T any](open opener[S], list func(r *http.Request, scope S, p store.Page) ([]T, *store.Cursor, error)) httpx.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		scope, err := open(r)
		if err != nil {
			return err
		}
		p, err := httpx.PageParams(r)
		if err != nil {
			return err
		}
		out, next, err := list(r, scope, p)
		if err != nil {
			return err
		}
		httpx.WritePage(w, r, out, next)
		return nil
	}
}

// pathID is the opener of a route scoped by one path UUID.
func pathID(name string) opener[string] {
	return func(r *http.Request) (string, error) { return httpx.PathID(r, name) }
}

// pathValue is the opener of a route that passes a path value on
// unchecked (its service validates it).
func pathValue(name string) opener[string] {
	return func(r *http.Request) (string, error) { return r.PathValue(name), nil }
}
