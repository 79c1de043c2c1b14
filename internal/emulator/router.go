package emulator

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// maxBodyBytes bounds request bodies (attachments arrive base64 encoded).
const maxBodyBytes = 40 << 20

// call is one authenticated provider API request being served.
type call struct {
	s       *Server
	r       *http.Request
	key     *apiKey
	p       map[string]string
	q       url.Values
	body    []byte
	rec     *recorder
	op      string
	route   *route
	idemKey string
	hasIdem bool
}

// noContent makes a handler answer 204 with an empty body.
type noContent struct{}

// rawBody makes a handler answer 200 with a non-JSON body.
type rawBody struct {
	contentType string
	data        []byte
}

type handler func(c *call) (any, error)

// route is one provider endpoint. Patterns are path segments after /v0;
// "{name}" segments capture one percent-decoded segment.
type route struct {
	method  string
	pattern []string
	op      string // fixed operation name used by fault matching
	perm    string // required permission, "" for none
	h       handler
}

func (rt *route) match(method string, segs []string) (map[string]string, bool) {
	if rt.method != method || len(rt.pattern) != len(segs) {
		return nil, false
	}
	var p map[string]string
	for i, pat := range rt.pattern {
		if strings.HasPrefix(pat, "{") {
			if p == nil {
				p = map[string]string{}
			}
			p[pat[1:len(pat)-1]] = segs[i]
			continue
		}
		if pat != segs[i] {
			return nil, false
		}
	}
	return p, true
}

// splitPath percent-decodes each segment of the escaped path individually
// with path semantics, so "+" stays "+" and an encoded "/" inside a
// Message-ID does not split it. ok is false for an empty segment.
func splitPath(escaped string) (segs []string, ok bool, err error) {
	escaped = strings.TrimPrefix(escaped, "/")
	if escaped == "" {
		return nil, true, nil
	}
	parts := strings.Split(escaped, "/")
	ok = true
	for i, part := range parts {
		if part == "" {
			// A trailing slash is tolerated; an empty inner segment is what
			// the real gateway rejects with a bare 403.
			if i == len(parts)-1 && i > 0 {
				parts = parts[:i]
				break
			}
			ok = false
		}
		d, uerr := url.PathUnescape(part)
		if uerr != nil {
			return nil, ok, fmt.Errorf("decode path segment %q: %w", part, uerr)
		}
		parts[i] = d
	}
	return parts, ok, nil
}

// routes builds the top-level HTTP handler.
func (s *Server) routes() http.Handler {
	table := s.apiRoutes()
	ctl := s.controlRoutes()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			// Any other request may change the mailboxes; the state
			// file (Options.StateFile) is written after it.
			defer s.markDirty()
		}
		path := r.URL.EscapedPath()
		switch {
		case strings.HasPrefix(path, "/_emulator/"):
			ctl.ServeHTTP(w, r)
		case strings.HasPrefix(path, "/_files/"):
			s.serveFile(w, r)
		case path == "/v0" || path == "/v0/" || strings.HasPrefix(path, "/v0/"):
			s.serveAPI(w, r, table)
		case path == "/" || path == "/healthz":
			writeJSON(w, http.StatusOK, map[string]string{"status": "ok", "service": "agentmail-emulator"})
		default:
			writeAPIError(w, errNotFound("Route"))
		}
	})
}

func isWebSocketUpgrade(r *http.Request) bool {
	return strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
}

// serveAPI runs one provider request through the pipeline: record, fault
// injection, gateway checks, authentication, routing, permission check,
// handler, and the commit/stall/delay tail of pass-through faults.
func (s *Server) serveAPI(w http.ResponseWriter, r *http.Request, table []*route) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeJSON(w, http.StatusRequestEntityTooLarge, &apiError{Name: "ValidationError", Code: "validation_error", Message: "Request body too large"})
			return
		}
		return
	}
	rawPath := r.URL.EscapedPath()
	segs, segOK, perr := splitPath(strings.TrimPrefix(rawPath, "/v0"))

	var rt *route
	var params map[string]string
	if perr == nil && segOK {
		for _, cand := range table {
			if p, ok := cand.match(r.Method, segs); ok {
				rt, params = cand, p
				break
			}
		}
	}
	op := "request"
	if rt != nil && rt.op != "" {
		op = rt.op
	}
	upgrade := len(segs) == 0 && r.Method == http.MethodGet
	if upgrade && isWebSocketUpgrade(r) {
		op = "websocket"
	}

	rec := newRecorder()
	idem, hasIdem := r.Header["Idempotency-Key"]
	idemKey := ""
	if hasIdem && len(idem) > 0 {
		idemKey = idem[0]
	}
	// Record after the response is complete (or abandoned) with its status.
	defer func() {
		if upgrade && isWebSocketUpgrade(r) {
			return // recorded by the WebSocket handler itself
		}
		s.recordRequest(r, rawPath, body, idemKey, rec.status())
	}()

	f := s.matchFault(r.Method, rawPath, r.URL.Path, op)
	if f != nil && f.Status != 0 {
		s.serveFault(w, r, f, rec)
		return
	}

	if upgrade {
		if f != nil {
			if !sleepCtx(r.Context(), f.delay()) {
				return
			}
		}
		if isWebSocketUpgrade(r) {
			s.serveWebSocket(w, r, func(status int) { s.recordRequest(r, rawPath, nil, "", status) })
			return
		}
	}

	c := &call{s: s, r: r, p: params, q: r.URL.Query(), body: body, rec: rec, op: op, route: rt, idemKey: idemKey, hasIdem: hasIdem}
	s.dispatch(c, segOK, perr)

	if f != nil {
		// Pass-through fault: the request was served, but its completion is
		// delayed (the idempotency record stays in flight meanwhile) or its
		// body never finishes.
		if f.Stall {
			rec.commit()
			rec.writeHeadersOnly(w)
			s.stallUntilGone(r)
			return
		}
		sleepCtx(r.Context(), f.delay())
	}
	rec.commit()
	rec.flushTo(w)
}

// dispatch authenticates and runs the routed handler, writing into c.rec.
func (s *Server) dispatch(c *call, segOK bool, perr error) {
	w, r := c.rec, c.r
	if perr != nil || !segOK {
		writeGatewayForbidden(w)
		return
	}
	key, aerr, bare := s.authenticate(r.Header.Get("Authorization"))
	if bare {
		writeGatewayForbidden(w)
		return
	}
	if aerr != nil {
		writeAPIError(w, aerr)
		return
	}
	c.key = key
	if c.route == nil {
		writeAPIError(w, errNotFound("Route"))
		return
	}
	if c.route.perm != "" && !keyHas(key, c.route.perm) {
		writeAPIError(w, errMissingPermission(c.route.perm))
		return
	}
	res, err := c.route.h(c)
	if err != nil {
		var ae *apiError
		if !errors.As(err, &ae) {
			s.log.Error("emulator handler failed", "op", c.op, "err", err)
			ae = newAPIError(http.StatusInternalServerError, "InternalServerError", "internal_error", "Internal server error", "")
		}
		writeAPIError(w, ae)
		return
	}
	switch v := res.(type) {
	case noContent:
		writeNoContent(w)
	case rawBody:
		w.Header().Set("Content-Type", v.contentType)
		w.Header().Set("Content-Length", strconv.Itoa(len(v.data)))
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(v.data)
	default:
		writeJSON(w, http.StatusOK, v)
	}
}

// stallUntilGone blocks until the client disconnects or the server closes.
func (s *Server) stallUntilGone(r *http.Request) {
	select {
	case <-r.Context().Done():
	case <-s.ctx.Done():
	}
}

// decode strictly decodes the JSON body into v: unknown fields are a 400,
// which surfaces client/SDK wire mismatches early. An empty body leaves v
// untouched when allowEmpty is set.
func (c *call) decode(v any, allowEmpty bool) error {
	trimmed := bytes.TrimSpace(c.body)
	if len(trimmed) == 0 || string(trimmed) == "null" {
		if allowEmpty {
			return nil
		}
		return errValidation("Request body is required")
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return errValidation("Invalid request body: " + err.Error())
	}
	if dec.More() {
		return errValidation("Invalid request body: trailing data")
	}
	return nil
}

// recorder buffers a handler's response so that pass-through faults can
// delay or stall it, and so that side effects (idempotency completion) run
// exactly when the response is released.
type recorder struct {
	hdr   http.Header
	code  int
	buf   bytes.Buffer
	hooks []func()
}

func newRecorder() *recorder { return &recorder{hdr: http.Header{}} }

// Header implements http.ResponseWriter.
func (rc *recorder) Header() http.Header { return rc.hdr }

// WriteHeader implements http.ResponseWriter; the first status wins.
func (rc *recorder) WriteHeader(code int) {
	if rc.code == 0 {
		rc.code = code
	}
}

// Write implements http.ResponseWriter by buffering.
func (rc *recorder) Write(b []byte) (int, error) {
	if rc.code == 0 {
		rc.code = http.StatusOK
	}
	return rc.buf.Write(b)
}

func (rc *recorder) status() int {
	if rc.code == 0 {
		return http.StatusOK
	}
	return rc.code
}

// onCommit registers fn to run when the response is released.
func (rc *recorder) onCommit(fn func()) { rc.hooks = append(rc.hooks, fn) }

func (rc *recorder) commit() {
	hooks := rc.hooks
	rc.hooks = nil
	for _, h := range hooks {
		h()
	}
}

func (rc *recorder) copyHeaders(w http.ResponseWriter) {
	for k, v := range rc.hdr {
		w.Header()[k] = v
	}
}

func (rc *recorder) flushTo(w http.ResponseWriter) {
	rc.copyHeaders(w)
	w.WriteHeader(rc.status())
	_, _ = w.Write(rc.buf.Bytes())
}

// writeHeadersOnly sends the status line and headers (promising a body that
// never comes) and flushes them to the client.
func (rc *recorder) writeHeadersOnly(w http.ResponseWriter) {
	rc.copyHeaders(w)
	if rc.buf.Len() > 0 {
		w.Header().Set("Content-Length", strconv.Itoa(rc.buf.Len()+1))
	}
	w.WriteHeader(rc.status())
	if rc.buf.Len() > 1 {
		_, _ = w.Write(rc.buf.Bytes()[:1])
	}
	if fl, ok := w.(http.Flusher); ok {
		fl.Flush()
	}
}
