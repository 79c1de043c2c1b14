// Package apiclient is the one client of the control plane's own JSON API
// (docs/api.md): a method per route, typed with the structs the API
// encodes (internal/domain and the services' views), over one of two
// transports. HTTP (New) is what the CLI and `email qualify` use against a
// server; in-process (InProcess) serves the API handler directly, which is
// how the web UI acts as its signed-in user: the caller puts the actor on
// the request context (api.WithPresetActor) and the API skips its own
// authentication.
//
// The package knows paths, not handlers: it imports no HTTP handler
// package, so the routes stay where they are registered and the client's
// links to them show in `go list` through the types it shares.
package apiclient

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// maxAnswer bounds how much of one answer is read.
const maxAnswer = 64 << 20

// Options configure an HTTP client.
type Options struct {
	// BaseURL is the API root, ending in /api (e.g. http://127.0.0.1:3100/api).
	BaseURL string
	// Token is the bearer credential: a run token (pcr_…) or a board key
	// (pcb_…); empty is the local board (local_trusted mode, loopback).
	Token string
	// RunID is sent as X-Paperclip-Run-Id with a run token.
	RunID string
	// HTTP is the client to send with (default: 60 s timeout).
	HTTP *http.Client
}

// Client calls the API. Its methods are safe for concurrent use.
type Client struct {
	base  string
	token string
	runID string
	http  *http.Client
}

// New returns a client of the API at o.BaseURL.
func New(o Options) *Client {
	hc := o.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 60 * time.Second}
	}
	return &Client{base: strings.TrimRight(o.BaseURL, "/"), token: o.Token, runID: o.RunID, http: hc}
}

// inProcessBase is the base URL of an in-process client; the host is never
// dialled.
const inProcessBase = "http://in-process/api"

// InProcess returns a client that serves every request with h (the API
// handler with its middleware) in this process. The request's context
// reaches the handler unchanged, so a context carrying a preset actor acts
// as that actor.
func InProcess(h http.Handler) *Client {
	return &Client{base: inProcessBase, http: &http.Client{Transport: handlerTransport{h: h}}}
}

// BaseURL returns the API root the client calls.
func (c *Client) BaseURL() string { return c.base }

// handlerTransport is an http.RoundTripper that answers with a handler.
type handlerTransport struct{ h http.Handler }

// RoundTrip serves req with the handler, as a loopback request.
func (t handlerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		// A RoundTripper closes the body it was given; a streamed body's
		// writer then stops.
		defer req.Body.Close()
	}
	sreq := req.Clone(req.Context())
	if sreq.Body == nil {
		sreq.Body = http.NoBody
	}
	sreq.RequestURI = req.URL.RequestURI()
	sreq.RemoteAddr = "127.0.0.1:0"
	rec := &recorder{header: http.Header{}}
	t.h.ServeHTTP(rec, sreq)
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	return &http.Response{StatusCode: rec.status, Status: strconv.Itoa(rec.status) + " " + http.StatusText(rec.status),
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: rec.header,
		Body: io.NopCloser(&rec.body), ContentLength: int64(rec.body.Len()), Request: req}, nil
}

// recorder is the ResponseWriter of an in-process request.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
}

func (r *recorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.body.Write(p)
}

// Flush lets streaming handlers flush; the answer is read when they return.
func (r *recorder) Flush() {}

// Error is an answer with status ≥ 400: the API's error body
// ({error, code?, details?}) with the status and headers that matter.
type Error struct {
	Method, Path string
	Status       int
	Message      string
	Code         string
	Details      map[string]any
	// RetryAfter is the Retry-After header in seconds (0 when absent),
	// RetryAfterRaw the header as sent.
	RetryAfter    time.Duration
	RetryAfterRaw string
	RequestID     string
	// Body is the answer as it came (at most maxAnswer bytes).
	Body []byte
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s %s: HTTP %d: %s", e.Method, e.Path, e.Status, e.Message)
}

// Response is an answer of any status, unread, as Raw returns it.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// Raw sends body (JSON, may be nil) and returns the answer whatever its
// status. path is relative to the API root (a leading "/api" is accepted).
// It is for callers that pass the API's JSON through unchanged, such as
// `paperclipai api`.
func (c *Client) Raw(ctx context.Context, method, path string, body []byte) (Response, error) {
	if body == nil {
		return c.request(ctx, method, path, "", nil)
	}
	return c.request(ctx, method, path, "application/json", bytes.NewReader(body))
}

// request sends body (of contentType, when body is not nil) and reads the
// answer whatever its status.
func (c *Client) request(ctx context.Context, method, path, contentType string, body io.Reader) (Response, error) {
	path = "/" + strings.TrimPrefix(strings.TrimPrefix(path, "/"), "api/")
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return Response{}, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", contentType)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
		if c.runID != "" && strings.HasPrefix(c.token, "pcr_") {
			req.Header.Set("X-Paperclip-Run-Id", c.runID)
		}
	}
	resp, err := c.http.Do(req)
	if err != nil {
		// The URL error names the URL, never a header.
		return Response{}, fmt.Errorf("call %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return Response{}, fmt.Errorf("%s %s: read answer: %w", method, path, err)
	}
	return Response{Status: resp.StatusCode, Header: resp.Header, Body: out}, nil
}

// Do sends in (JSON-encoded when not nil) and decodes a 2xx answer into out
// (when not nil). An answer with status ≥ 400 is an *Error.
func (c *Client) Do(ctx context.Context, method, path string, in, out any) error {
	_, err := c.doHeader(ctx, method, path, in, out)
	return err
}

// doHeader is Do that also returns the answer's headers.
func (c *Client) doHeader(ctx context.Context, method, path string, in, out any) (http.Header, error) {
	var body []byte
	if in != nil {
		raw, err := json.Marshal(in)
		if err != nil {
			return nil, fmt.Errorf("encode %s %s: %w", method, path, err)
		}
		body = raw
	}
	res, err := c.Raw(ctx, method, path, body)
	if err != nil {
		return nil, err
	}
	if res.Status >= 400 {
		return res.Header, DecodeError(method, path, res)
	}
	if out != nil && len(bytes.TrimSpace(res.Body)) > 0 {
		if err := json.Unmarshal(res.Body, out); err != nil {
			return res.Header, fmt.Errorf("%s %s: decode answer: %w", method, path, err)
		}
	}
	return res.Header, nil
}

// DecodeError reads an error answer into an *Error.
func DecodeError(method, path string, res Response) *Error {
	var body struct {
		Error   string         `json:"error"`
		Message string         `json:"message"`
		Code    string         `json:"code"`
		Details map[string]any `json:"details"`
	}
	e := &Error{Method: method, Path: path, Status: res.Status, RequestID: res.Header.Get("X-Request-Id"), Body: res.Body,
		RetryAfterRaw: strings.TrimSpace(res.Header.Get("Retry-After"))}
	if json.Unmarshal(res.Body, &body) == nil {
		e.Message, e.Code, e.Details = body.Error+body.Message, body.Code, body.Details
	}
	if e.Message == "" {
		e.Message = http.StatusText(res.Status)
	}
	if s, err := strconv.Atoi(e.RetryAfterRaw); err == nil && s > 0 {
		e.RetryAfter = time.Duration(s) * time.Second
	}
	return e
}

// Page reads one page of an array listing (GET) into out and returns the
// cursor of the next page ("" on the last one; docs/api.md, "Paging").
func (c *Client) Page(ctx context.Context, path string, out any) (string, error) {
	h, err := c.doHeader(ctx, http.MethodGet, path, nil, out)
	if err != nil {
		return "", err
	}
	return h.Get("X-Next-Cursor"), nil
}

// Stream GETs path and, when the answer is a success, copies its body to w
// as it arrives, with no overall timeout (an export may stream for as long
// as it has rows). A refused request is returned as its Response with the
// body read (bounded), for the caller to report.
func (c *Client) Stream(ctx context.Context, path string, w io.Writer) (Response, error) {
	path = "/" + strings.TrimPrefix(strings.TrimPrefix(path, "/"), "api/")
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	if err != nil {
		return Response{}, fmt.Errorf("GET %s: %w", path, err)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
		if c.runID != "" && strings.HasPrefix(c.token, "pcr_") {
			req.Header.Set("X-Paperclip-Run-Id", c.runID)
		}
	}
	hc := *c.http
	hc.Timeout = 0
	resp, err := hc.Do(req)
	if err != nil {
		return Response{}, fmt.Errorf("call GET %s: %w", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 400 {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return Response{Status: resp.StatusCode, Header: resp.Header, Body: body}, nil
	}
	if _, err := io.Copy(w, resp.Body); err != nil {
		return Response{}, fmt.Errorf("GET %s: %w", path, err)
	}
	return Response{Status: resp.StatusCode, Header: resp.Header}, nil
}
