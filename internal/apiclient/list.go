package apiclient

import (
	"context"
	"net/url"
	"strings"
)

// maxPages bounds List.All: 200 pages of 200 rows. A server that kept
// answering with a next page must not keep a caller reading forever.
const maxPages = 200

// List is a paged array listing (docs/api.md, "Paging"): the route's path
// and the row type it returns.
type List[T any] struct {
	c    *Client
	path string
}

func newList[T any](c *Client, path string) List[T] { return List[T]{c: c, path: path} }

// all reads every page of the array listing at path: the methods that
// answer a whole (configuration) list at once share it, so none stops at
// the first page.
func all[T any](ctx context.Context, c *Client, path string) ([]T, error) {
	return newList[T](c, path).All(ctx, nil)
}

// ListAt is the listing at path (relative to the API root, with or
// without a query) for a route without a typed method.
func ListAt[T any](c *Client, path string) List[T] { return newList[T](c, path) }

// with returns path with the query q appended.
func with(path string, q url.Values) string {
	if len(q) == 0 {
		return path
	}
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	return path + sep + q.Encode()
}

// Page reads one page with the filters and paging parameters in q (limit,
// cursor, …) and returns it with the next page's cursor ("" on the last).
func (l List[T]) Page(ctx context.Context, q url.Values) ([]T, string, error) {
	var out []T
	next, err := l.c.Page(ctx, with(l.path, q), &out)
	return out, next, err
}

// All reads every page, 200 rows a request, with the filters in q.
func (l List[T]) All(ctx context.Context, q url.Values) ([]T, error) {
	p := url.Values{}
	for k, v := range q {
		p[k] = v
	}
	p.Set("limit", "200")
	all := []T{}
	for range maxPages {
		page, next, err := l.Page(ctx, p)
		if err != nil {
			return nil, err
		}
		all = append(all, page...)
		if next == "" {
			break
		}
		p.Set("cursor", next)
	}
	return all, nil
}

// Query is a url.Values built from name/value pairs, skipping empty values.
func Query(kv ...string) url.Values {
	q := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			q.Set(kv[i], kv[i+1])
		}
	}
	return q
}
