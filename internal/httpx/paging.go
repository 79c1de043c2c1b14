package httpx

import (
	"net/http"
	"strconv"

	"github.com/paperclipai/paperclipai/internal/store"
)

// The page sizes of every listing (docs/api.md, "Paging").
const (
	DefaultPageLimit = store.DefaultPageLimit
	MaxPageLimit     = store.MaxPageLimit
)

// ErrBadCursor is the answer to a cursor no listing handed out.
var ErrBadCursor = &Error{Status: http.StatusBadRequest,
	Message: "invalid cursor: pass the nextCursor (or X-Next-Cursor) value of this listing unchanged"}

// PageList is the body of a listing whose answer is an object: one page
// of items and the cursor of the next (null on the last page).
type PageList[T any] struct {
	Items      []T     `json:"items"`
	NextCursor *string `json:"nextCursor"`
}

// PageParams reads ?limit= (default 50, 1..200) and ?cursor= of a listing
// whose rows have UUID ids.
func PageParams(r *http.Request) (store.Page, error) { return PageParamsWith(r, store.ValidID) }

// PageParamsWith is PageParams for a listing whose row ids have another
// shape (validID, say store.ValidDeliveryID): the cursor of such a listing
// carries its ids, while every other listing's cursor still takes UUIDs
// only.
func PageParamsWith(r *http.Request, validID func(string) bool) (store.Page, error) {
	q := r.URL.Query()
	p := store.Page{Limit: DefaultPageLimit}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxPageLimit {
			return p, Errorf(http.StatusBadRequest, "limit must be an integer between 1 and %d", MaxPageLimit)
		}
		p.Limit = n
	}
	if v := q.Get("cursor"); v != "" {
		c, err := decodeCursor(v, validID)
		if err != nil {
			return p, err
		}
		p.After = &c
	}
	return p, nil
}

// EncodeCursor renders a cursor as an opaque URL-safe token
// (store.EncodeCursor).
func EncodeCursor(c store.Cursor) string { return store.EncodeCursor(c) }

// DecodeCursor parses a token from EncodeCursor of a listing with UUID row
// ids; anything else is ErrBadCursor.
func DecodeCursor(v string) (store.Cursor, error) { return decodeCursor(v, store.ValidID) }

func decodeCursor(v string, validID func(string) bool) (store.Cursor, error) {
	c, err := store.DecodeCursor(v, validID)
	if err != nil {
		return store.Cursor{}, ErrBadCursor
	}
	return c, nil
}

// TrimPage is store.TrimPage, for the route owners that page here: it cuts
// rows (fetched with one row more than the page) to the page and returns
// the cursor of the next page, or nil when no row follows.
func TrimPage[T any](rows []T, p store.Page, key func(T) store.Cursor) ([]T, *store.Cursor) {
	return store.TrimPage(rows, p, key)
}

// NewPageList is the object body of a page.
func NewPageList[T any](items []T, next *store.Cursor) PageList[T] {
	if items == nil {
		items = []T{}
	}
	out := PageList[T]{Items: items}
	if next != nil {
		s := EncodeCursor(*next)
		out.NextCursor = &s
	}
	return out
}

// SetNextPage announces the next page of an array listing in the headers:
// `Link: <same URL with cursor=…>; rel="next"` and `X-Next-Cursor`. A
// last page carries neither.
func SetNextPage(w http.ResponseWriter, r *http.Request, next *store.Cursor) {
	if next == nil {
		return
	}
	token := EncodeCursor(*next)
	u := *r.URL
	q := u.Query()
	q.Set("cursor", token)
	u.RawQuery = q.Encode()
	w.Header().Set("Link", "<"+u.RequestURI()+`>; rel="next"`)
	w.Header().Set("X-Next-Cursor", token)
}

// WritePage answers an array listing: the page as a JSON array, the next
// page in the headers (SetNextPage).
func WritePage[T any](w http.ResponseWriter, r *http.Request, items []T, next *store.Cursor) {
	if items == nil {
		items = []T{}
	}
	SetNextPage(w, r, next)
	WriteJSON(w, http.StatusOK, items)
}
