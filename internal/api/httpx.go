package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/paperclipai/paperclipai/internal/authz"
	"github.com/paperclipai/paperclipai/internal/store"
)

// Error is an API error with its HTTP status; its Message is shown to the
// caller, so it must never carry secrets or provider text.
type Error struct {
	Status     int
	Message    string
	Code       string
	Details    map[string]any
	RetryAfter time.Duration
}

func (e *Error) Error() string { return e.Message }

// Errorf returns an *Error with a formatted message.
func Errorf(status int, format string, args ...any) *Error {
	return &Error{Status: status, Message: fmt.Sprintf(format, args...)}
}

// errorBody is the wire shape of every error response.
type errorBody struct {
	Error   string         `json:"error"`
	Code    string         `json:"code,omitempty"`
	Details map[string]any `json:"details,omitempty"`
}

// writeJSON writes v as JSON with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// writeError maps err to a status and the error body; unexpected errors are
// logged with the request id and answered with a generic 500.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var ae *Error
	switch {
	case errors.As(err, &ae):
	case errors.Is(err, authz.ErrUnauthenticated):
		ae = &Error{Status: http.StatusUnauthorized, Message: "authentication required: send Authorization: Bearer <board API key or run token>"}
	case errors.Is(err, authz.ErrForbidden):
		ae = &Error{Status: http.StatusForbidden, Message: err.Error()}
	case errors.Is(err, store.ErrNotFound):
		ae = &Error{Status: http.StatusNotFound, Message: notFoundMessage(err)}
	case errors.Is(err, store.ErrConflict):
		ae = &Error{Status: http.StatusConflict, Message: err.Error()}
	default:
		s.log.Error("request failed", "requestId", requestID(r), "method", r.Method, "path", r.URL.Path, "err", err)
		ae = &Error{Status: http.StatusInternalServerError, Message: "internal error (request " + requestID(r) + ")"}
	}
	if ae.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int((ae.RetryAfter+time.Second-1)/time.Second)))
	}
	writeJSON(w, ae.Status, errorBody{Error: ae.Message, Code: ae.Code, Details: ae.Details})
}

// notFoundMessage turns "get issue: not found" into "issue not found".
func notFoundMessage(err error) string {
	msg := err.Error()
	first := strings.SplitN(msg, ":", 2)[0]
	words := strings.Fields(first)
	if len(words) >= 2 && (words[0] == "get" || words[0] == "lookup") {
		return strings.Join(words[1:], " ") + " not found"
	}
	if len(words) == 1 {
		return words[0] + " not found"
	}
	return "not found"
}

// decodeJSON strictly decodes the request body into v: JSON content only,
// bounded size, no unknown fields, exactly one value.
func (s *Server) decodeJSON(w http.ResponseWriter, r *http.Request, v any) error {
	// The body is parsed as JSON whatever the Content-Type says (curl -d
	// sends a form type); only multipart bodies are clearly not JSON.
	if ct := strings.ToLower(r.Header.Get("Content-Type")); strings.HasPrefix(ct, "multipart/") {
		return Errorf(http.StatusUnsupportedMediaType, "request body must be JSON")
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.RequestBodyMaxBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return Errorf(http.StatusRequestEntityTooLarge, "request body exceeds %d bytes", mbe.Limit)
		}
		return Errorf(http.StatusBadRequest, "could not read request body")
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return Errorf(http.StatusBadRequest, "request body is required (a JSON object)")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return Errorf(http.StatusBadRequest, "invalid JSON body: %s", jsonErrorText(err))
	}
	if dec.More() {
		return Errorf(http.StatusBadRequest, "invalid JSON body: unexpected data after the JSON object")
	}
	return nil
}

func jsonErrorText(err error) string {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return fmt.Sprintf("malformed JSON at byte %d", syn.Offset)
	case errors.As(err, &typ):
		if typ.Field != "" {
			return fmt.Sprintf("field %q must be %s", typ.Field, typ.Type.String())
		}
		return fmt.Sprintf("expected %s", typ.Type.String())
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "malformed JSON: unexpected end of input"
	}
	msg := err.Error()
	if strings.HasPrefix(msg, "json: unknown field ") {
		return "unknown field " + strings.TrimPrefix(msg, "json: unknown field ")
	}
	return strings.TrimPrefix(msg, "json: ")
}

// pathID returns the path value name, requiring a UUID.
func pathID(r *http.Request, name string) (string, error) {
	v := r.PathValue(name)
	if !store.ValidID(v) {
		return "", Errorf(http.StatusBadRequest, "invalid %s: must be a UUID", name)
	}
	return v, nil
}

// queryID returns an optional UUID query parameter.
func queryID(r *http.Request, name string) (string, error) {
	v := r.URL.Query().Get(name)
	if v != "" && !store.ValidID(v) {
		return "", Errorf(http.StatusBadRequest, "invalid %s: must be a UUID", name)
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
