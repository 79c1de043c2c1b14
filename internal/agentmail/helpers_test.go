package agentmail

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// testKey is a recognizable fake credential; canary tests assert that it
// never appears in an error string.
const testKey = "am_test_CANARYKEY_4f1d2c"

// closeCounter wraps a transport and counts Close calls on every response
// body it hands out. It instruments the real loopback exchange; it does
// not fake responses.
type closeCounter struct {
	base     http.RoundTripper
	closes   atomic.Int32
	closeErr error
	// breakBody replaces the body with one whose Read fails at once,
	// standing in for a stream another reader has already locked.
	breakBody bool
}

func (c *closeCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := c.base.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	body := resp.Body
	if c.breakBody {
		_ = body.Close()
		body = io.NopCloser(errReader{})
		resp.ContentLength = -1
	}
	resp.Body = &countingBody{ReadCloser: body, c: c}
	return resp, nil
}

type countingBody struct {
	io.ReadCloser
	c *closeCounter
}

func (b *countingBody) Close() error {
	b.c.closes.Add(1)
	_ = b.ReadCloser.Close()
	return b.c.closeErr
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("body already locked") }

// recorder is an httptest server handler wrapper that counts requests and
// remembers the last one.
type recorder struct {
	mu      sync.Mutex
	count   int
	last    *http.Request
	rawPath string
	body    []byte
}

func (r *recorder) record(req *http.Request) {
	b, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.count++
	r.last = req.Clone(context.Background())
	r.rawPath = req.URL.EscapedPath()
	r.body = b
}

func (r *recorder) snapshot() (int, *http.Request, string, []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.count, r.last, r.rawPath, r.body
}

// newTestServer starts a loopback server whose handler is h, recording
// each request first. The returned release channel is closed at cleanup so
// that handlers that stall can wait on it.
func newTestServer(t *testing.T, h func(w http.ResponseWriter, r *http.Request, release <-chan struct{})) (*httptest.Server, *recorder) {
	t.Helper()
	rec := &recorder{}
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec.record(r)
		h(w, r, release)
	}))
	t.Cleanup(func() {
		close(release)
		srv.Close()
	})
	return srv, rec
}

// newTestClient returns a client for srv whose transport counts body closes.
func newTestClient(t *testing.T, srv *httptest.Server, cc *closeCounter) *Client {
	t.Helper()
	var hc *http.Client
	if cc != nil {
		cc.base = srv.Client().Transport
		hc = &http.Client{Transport: cc}
	}
	c, err := New(Options{BaseURL: srv.URL + "/v0", APIKey: testKey, HTTPClient: hc})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c
}

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// asError asserts that err is a provider *Error and returns it.
func asError(t *testing.T, err error) *Error {
	t.Helper()
	var pe *Error
	if !errors.As(err, &pe) {
		t.Fatalf("error %v (%T) is not a provider *Error", err, err)
	}
	return pe
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
