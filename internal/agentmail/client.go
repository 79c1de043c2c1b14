package agentmail

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync/atomic"
	"time"
)

// Client transport limits (docs/email-pipeline.md, "The provider client").
const (
	// DefaultRequestTimeout bounds every REST request, including reading
	// its response body.
	DefaultRequestTimeout = 25 * time.Second
	// MaxResponseBytes caps a successful response body; a larger one fails
	// with [ErrResponseTooLarge].
	MaxResponseBytes = 16 << 20
)

// Options configures a [Client].
type Options struct {
	// BaseURL is the REST base including the version prefix. Empty means
	// [DefaultAPIBaseURL]. It must pass [ValidateAPIBaseURL].
	BaseURL string
	// APIKey is the bearer key; [Client.WithAPIKey] derives clients for
	// other keys that share the connection pool.
	APIKey string
	// HTTPClient supplies the transport. Its Timeout, CheckRedirect and Jar
	// are not used: the client applies its own timeout and refuses
	// redirects. Nil means a dedicated clone of http.DefaultTransport.
	HTTPClient *http.Client
	// Timeout overrides [DefaultRequestTimeout] when positive.
	Timeout time.Duration
}

// Client calls the AgentMail REST API with one bearer key. It is safe for
// concurrent use. Every method makes at most one HTTP request and never
// retries.
type Client struct {
	base     *url.URL
	loopback bool
	key      string
	hc       *http.Client
	download *http.Client
	timeout  time.Duration
}

// New returns a client for opts. It fails only when the base URL is
// invalid.
func New(opts Options) (*Client, error) {
	raw := opts.BaseURL
	if raw == "" {
		raw = DefaultAPIBaseURL
	}
	base, err := ValidateAPIBaseURL(raw)
	if err != nil {
		return nil, err
	}
	var transport http.RoundTripper
	if opts.HTTPClient != nil && opts.HTTPClient.Transport != nil {
		transport = opts.HTTPClient.Transport
	} else {
		transport = http.DefaultTransport.(*http.Transport).Clone()
	}
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = DefaultRequestTimeout
	}
	loopback := isLoopbackHost(base.Hostname())
	return &Client{
		base:     base,
		loopback: loopback,
		key:      opts.APIKey,
		hc:       &http.Client{Transport: transport, CheckRedirect: refuseRedirect},
		download: newDownloadClient(loopback),
		timeout:  timeout,
	}, nil
}

// WithAPIKey returns a client that uses key and shares everything else,
// including the connection pool, with c.
func (c *Client) WithAPIKey(key string) *Client {
	cp := *c
	cp.key = key
	return &cp
}

// BaseURL returns the REST base URL the client calls.
func (c *Client) BaseURL() string { return c.base.String() }

// refuseRedirect makes the http.Client hand a 3xx response back instead of
// following it; the client then reports it as an [*Error]. Following a
// redirect could forward the bearer key or a send to an unintended place.
func refuseRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// request describes one REST call. path is relative to the base URL and
// already escaped (see pathOf).
type request struct {
	method         string
	path           string
	query          url.Values
	body           any
	idempotencyKey string
	out            any
	// status, when set, receives the status of a successful response so
	// that callers validating the decoded body can report it.
	status *int
}

// Do performs a raw REST request: method and path (relative to the base
// URL, already escaped, for example "/inboxes/a%40b.c") with an optional
// query, an optional JSON body and an optional destination for the decoded
// JSON response. It applies the same headers, limits and error
// classification as the typed methods, and exists for operations this
// package does not wrap.
func (c *Client) Do(ctx context.Context, method, path string, query url.Values, body, out any) error {
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	return c.do(ctx, request{method: method, path: path, query: query, body: body, out: out})
}

func (c *Client) do(ctx context.Context, r request) error {
	op := OperationFor(r.method, r.path)
	if !validAPIKey(c.key) {
		return &ArgumentError{Operation: op, Reason: "API key missing or malformed"}
	}
	if r.idempotencyKey != "" && !validIdempotencyKey(r.idempotencyKey) {
		return &ArgumentError{Operation: op, Reason: "idempotency key must be 1-256 characters of A-Z a-z 0-9 - . _ ~"}
	}
	target := c.base.String() + r.path
	if len(r.query) > 0 {
		target += "?" + r.query.Encode()
	}
	u, err := url.Parse(target)
	if err != nil {
		return &ArgumentError{Operation: op, Reason: "request path is not a valid URL"}
	}

	var body io.Reader
	if r.body != nil {
		b, err := json.Marshal(r.body)
		if err != nil {
			return &ArgumentError{Operation: op, Reason: "request body is not JSON-encodable"}
		}
		body = bytes.NewReader(b)
	}

	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	ctx, gotConn := traceConn(ctx)
	req, err := http.NewRequestWithContext(ctx, r.method, u.String(), body)
	if err != nil {
		return &ArgumentError{Operation: op, Reason: "request could not be built"}
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if r.idempotencyKey != "" {
		req.Header.Set("Idempotency-Key", r.idempotencyKey)
	}

	resp, err := c.hc.Do(req)
	if err != nil {
		return newNetworkError(op, err, gotConn.Load())
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		// Retry-After is classified from the headers before the body is
		// touched, so a broken body can never lose it.
		return &Error{
			Status:     resp.StatusCode,
			Operation:  op,
			RetryAfter: parseRetryAfter(resp.Header.Get("Retry-After"), time.Now()),
			Code:       inspectErrorBody(resp.Body, resp.ContentLength),
		}
	}
	defer func() { _ = resp.Body.Close() }()
	if r.status != nil {
		*r.status = resp.StatusCode
	}
	if resp.StatusCode == http.StatusNoContent || r.out == nil {
		// Drain (bounded) so the connection can be reused.
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, MaxResponseBytes))
		return nil
	}
	if resp.ContentLength > MaxResponseBytes {
		return &ResponseError{Operation: op, Status: resp.StatusCode, Detail: "too_large", kind: ErrResponseTooLarge}
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes+1))
	if err != nil {
		return newNetworkError(op, err, true)
	}
	if len(b) > MaxResponseBytes {
		return &ResponseError{Operation: op, Status: resp.StatusCode, Detail: "too_large", kind: ErrResponseTooLarge}
	}
	if err := json.Unmarshal(b, r.out); err != nil {
		return &ResponseError{Operation: op, Status: resp.StatusCode, Detail: jsonErrorDetail(err), kind: ErrMalformedResponse}
	}
	return nil
}

// jsonErrorDetail describes a decoding failure without quoting response
// content: time.ParseError and friends embed the offending value, so only
// the error category, offset and our own Go field path are kept.
func jsonErrorDetail(err error) string {
	var (
		syn *json.SyntaxError
		typ *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &syn):
		return "syntax_error"
	case errors.As(err, &typ):
		if typ.Field != "" {
			return "type_mismatch in " + typ.Field
		}
		return "type_mismatch"
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "truncated"
	}
	return "invalid_value"
}

// validAPIKey accepts a non-empty key of visible ASCII characters; anything
// else would be an invalid or injectable header value.
func validAPIKey(k string) bool {
	if k == "" || len(k) > 4096 {
		return false
	}
	for i := 0; i < len(k); i++ {
		if k[i] <= ' ' || k[i] >= 0x7f {
			return false
		}
	}
	return true
}

// validIdempotencyKey enforces AgentMail's Idempotency-Key charset: 1-256
// characters of A-Z a-z 0-9 - . _ ~.
func validIdempotencyKey(k string) bool {
	if k == "" || len(k) > 256 {
		return false
	}
	for i := 0; i < len(k); i++ {
		if !isUnreserved(k[i]) {
			return false
		}
	}
	return true
}

func isUnreserved(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~'
}

// escapeSegment percent-encodes one path segment, leaving only RFC 3986
// unreserved characters as they are. This encodes "@" (unlike
// url.PathEscape), matching the reference client:
// "agent@agentmail.to" becomes "agent%40agentmail.to" and
// "<m@d>" becomes "%3Cm%40d%3E". The dot segments "." and ".." are encoded
// too so an id can never climb out of its path position.
func escapeSegment(s string) string {
	if s == "." {
		return "%2E"
	}
	if s == ".." {
		return "%2E%2E"
	}
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if isUnreserved(c) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}

// pathOf builds an escaped relative path from literal segments ("inboxes")
// and caller-supplied ids. Every id must be non-empty: an empty segment
// would address a different resource (or the gateway's bare 403).
func pathOf(op string, parts ...pathPart) (string, error) {
	var b strings.Builder
	for _, p := range parts {
		b.WriteByte('/')
		if p.literal != "" {
			b.WriteString(p.literal)
			continue
		}
		if p.id == "" {
			return "", &ArgumentError{Operation: op, Reason: "empty " + p.name}
		}
		b.WriteString(escapeSegment(p.id))
	}
	return b.String(), nil
}

type pathPart struct {
	literal string
	name    string
	id      string
}

func lit(s string) pathPart          { return pathPart{literal: s} }
func id(name, value string) pathPart { return pathPart{name: name, id: value} }

// traceConn reports, through the returned flag, whether a request made
// with the returned context obtained a connection. A request that never
// obtained one certainly did not reach AgentMail; anything later is
// "maybe sent". GotConn is the earliest point at which request bytes can
// leave the process.
func traceConn(ctx context.Context) (context.Context, *atomic.Bool) {
	var got atomic.Bool
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn: func(httptrace.GotConnInfo) { got.Store(true) },
	}), &got
}
