package api

import (
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/paperclipai/paperclipai/internal/authz"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/httpx"
	"github.com/paperclipai/paperclipai/internal/store"
)

// writeError maps err to a status and the error body; unexpected errors are
// logged with the request id and answered with a generic 500.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var ae *httpx.Error
	var refusal *domain.Refusal
	switch {
	case errors.As(err, &ae):
	case errors.As(err, &refusal):
		ae = httpx.FromRefusal(refusal)
	case errors.Is(err, authz.ErrUnauthenticated):
		ae = &httpx.Error{Status: http.StatusUnauthorized, Message: "authentication required: send Authorization: Bearer <board API key or run token>"}
	case errors.Is(err, authz.ErrForbidden):
		ae = &httpx.Error{Status: http.StatusForbidden, Message: err.Error()}
	case errors.Is(err, store.ErrNotFound):
		ae = &httpx.Error{Status: http.StatusNotFound, Message: notFoundMessage(err)}
	case errors.Is(err, store.ErrConflict):
		ae = &httpx.Error{Status: http.StatusConflict, Message: err.Error()}
	default:
		s.log.Error("request failed", "requestId", requestID(r), "method", r.Method, "path", r.URL.Path, "err", err)
		ae = &httpx.Error{Status: http.StatusInternalServerError, Message: "internal error (request " + requestID(r) + ")"}
	}
	if ae.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int((ae.RetryAfter+time.Second-1)/time.Second)))
	}
	httpx.WriteJSON(w, ae.Status, httpx.ErrorBody{Error: ae.Message, Code: ae.Code, Details: ae.Details})
}

// notFoundMessage names the missing thing: "issue not found".
func notFoundMessage(err error) string {
	var nf *store.NotFoundError
	if errors.As(err, &nf) && nf.What != "" {
		return nf.What + " not found"
	}
	return "not found"
}

// decodeJSON strictly decodes the request body into v within the
// configured body limit (see httpx.DecodeJSON).
func (s *Server) decodeJSON(w http.ResponseWriter, r *http.Request, v any) error {
	return httpx.DecodeJSON(w, r, s.cfg.RequestBodyMaxBytes, v)
}

// queryID returns an optional UUID query parameter.
func queryID(r *http.Request, name string) (string, error) {
	v := r.URL.Query().Get(name)
	if v != "" && !store.ValidID(v) {
		return "", httpx.Errorf(http.StatusBadRequest, "invalid %s: must be a UUID", name)
	}
	return v, nil
}

// statusRecorder captures the status code for logs and metrics.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// Flush supports streaming handlers (MCP).
func (s *statusRecorder) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap exposes the underlying writer to http.ResponseController.
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

func logLevel(status int) slog.Level {
	if status >= 500 {
		return slog.LevelError
	}
	return slog.LevelInfo
}

// inProcessLogLevel is logLevel for an in-process request: a server error
// stays an error, everything else is debug.
func inProcessLogLevel(status int) slog.Level {
	if status >= 500 {
		return slog.LevelError
	}
	return slog.LevelDebug
}

// The via label of the request metrics and logs: from the network, or
// from this process (the web UI's in-process calls).
const (
	viaHTTP      = "http"
	viaInProcess = "in_process"
)
