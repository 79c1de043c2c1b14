package ui

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/paperclipai/paperclipai/internal/api"
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

// callAPI dispatches one request to the API handler in-process, with the
// actor preset (the API then skips its own authentication), and decodes a
// JSON answer into out (when not nil). in is JSON-encoded when not nil.
func (u *UI) callAPI(ctx context.Context, a authz.Actor, method, path string, in, out any) *APIError {
	var body io.Reader
	if in != nil {
		raw, err := json.Marshal(in)
		if err != nil {
			return &APIError{Status: http.StatusInternalServerError, Message: "could not encode the request"}
		}
		body = bytes.NewReader(raw)
	}
	req := httptest.NewRequestWithContext(api.WithPresetActor(ctx, a), method, "/api"+path, body)
	req.RemoteAddr = "127.0.0.1:0"
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return u.dispatch(req, out)
}

// dispatch runs req against the API and decodes the answer.
func (u *UI) dispatch(req *http.Request, out any) *APIError {
	_, e := u.dispatchHeader(req, out)
	return e
}

// dispatchHeader is dispatch that also returns the answer's headers.
func (u *UI) dispatchHeader(req *http.Request, out any) (http.Header, *APIError) {
	rec := httptest.NewRecorder()
	u.d.API.ServeHTTP(rec, req)
	res := rec.Result()
	if res.StatusCode >= 400 {
		return res.Header, decodeAPIError(res.StatusCode, res.Header, rec.Body.Bytes())
	}
	if out != nil && rec.Body.Len() > 0 {
		if err := json.Unmarshal(rec.Body.Bytes(), out); err != nil {
			return res.Header, &APIError{Status: http.StatusInternalServerError, Message: fmt.Sprintf("unexpected API answer: %v", err),
				RequestID: res.Header.Get("X-Request-Id")}
		}
	}
	return res.Header, nil
}

func decodeAPIError(status int, h http.Header, raw []byte) *APIError {
	var body struct {
		Error   string         `json:"error"`
		Code    string         `json:"code"`
		Details map[string]any `json:"details"`
	}
	_ = json.Unmarshal(raw, &body)
	e := &APIError{Status: status, Message: body.Error, Code: body.Code, Details: body.Details, RequestID: h.Get("X-Request-Id")}
	if e.Message == "" {
		e.Message = http.StatusText(status)
	}
	if s, err := strconv.Atoi(h.Get("Retry-After")); err == nil && s > 0 {
		e.RetryAfter = time.Duration(s) * time.Second
	}
	return e
}

// maxFollowPages bounds apiAll: 200 pages of 200 rows.
const maxFollowPages = 200

// apiPage calls an array listing (GET) as the request's actor and returns
// the cursor of its next page ("" on the last page; docs/api.md,
// "Paging").
func (c *rc) apiPage(path string, out any) (string, *APIError) {
	req := httptest.NewRequestWithContext(api.WithPresetActor(c.r.Context(), c.actor), http.MethodGet, "/api"+path, nil)
	req.RemoteAddr = "127.0.0.1:0"
	h, e := c.u.dispatchHeader(req, out)
	c.nameRefusal(e)
	if e != nil {
		return "", e
	}
	return h.Get("X-Next-Cursor"), nil
}

// apiAll reads every page of an array listing into out, 200 rows a
// request: the pages that show a whole list (members, agents, inboxes)
// follow the cursors rather than stop at the first page.
func apiAll[T any](c *rc, path string, out *[]T) *APIError {
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	all := []T{}
	cursor := ""
	for range maxFollowPages {
		p := path + sep + "limit=200"
		if cursor != "" {
			p += "&cursor=" + url.QueryEscape(cursor)
		}
		var page []T
		next, e := c.apiPage(p, &page)
		if e != nil {
			return e
		}
		all = append(all, page...)
		if next == "" {
			break
		}
		cursor = next
	}
	*out = all
	return nil
}
