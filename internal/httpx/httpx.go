// Package httpx is the HTTP plumbing every route owner shares: the error a
// client sees (rendered as {error, code?, details?}), strict JSON request
// bodies, JSON answers, the request's actor, and the Router interface on
// which packages mount their routes. It imports no service, so the email
// pipelines can answer HTTP without depending on the API server.
package httpx

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/paperclipai/paperclipai/internal/authz"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/safetext"
	"github.com/paperclipai/paperclipai/internal/store"
)

// Error is a failure with the status and message a client sees. Message is
// shown as is, so it must never carry secrets or provider text.
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

// ErrorBody is the wire shape of every error response.
type ErrorBody struct {
	Error   string         `json:"error"`
	Code    string         `json:"code,omitempty"`
	Details map[string]any `json:"details,omitempty"`
}

// HandlerFunc is a handler that returns its failure for the router to
// render: an *Error as given, anything else mapped by the router.
type HandlerFunc func(w http.ResponseWriter, r *http.Request) error

// Router is where packages mount routes. Handle requires an authenticated
// actor (available through Actor); HandlePublic does not, for routes that
// authenticate otherwise or not at all (health, signed provider webhooks).
type Router interface {
	Handle(pattern string, h HandlerFunc)
	HandlePublic(pattern string, h HandlerFunc)
}

// WriteJSON writes v as JSON with status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// Respond ends a handler: with err nil it writes v as JSON with status;
// otherwise it writes nothing and returns err for the router's error
// answer. A handler ends with `return httpx.Respond(w, http.StatusOK, out, err)`.
func Respond(w http.ResponseWriter, status int, v any, err error) error {
	if err != nil {
		return err
	}
	WriteJSON(w, status, v)
	return nil
}

// Actor returns the request's authenticated actor (the zero Actor on a
// public route).
func Actor(r *http.Request) authz.Actor {
	a, _ := authz.FromContext(r.Context())
	return a
}

// PathID returns the path value name, requiring a UUID.
func PathID(r *http.Request, name string) (string, error) {
	v := r.PathValue(name)
	if !store.ValidID(v) {
		return "", Errorf(http.StatusBadRequest, "invalid %s: must be a UUID", name)
	}
	return v, nil
}

// DecodeJSON strictly decodes the request body into v: JSON content only,
// at most max bytes, no unknown fields, exactly one value.
func DecodeJSON(w http.ResponseWriter, r *http.Request, max int64, v any) error {
	// The server's guard (internal/websec) requires application/json on
	// /api bodies; this check also covers handlers reached another way.
	if ct := strings.ToLower(r.Header.Get("Content-Type")); strings.HasPrefix(ct, "multipart/") {
		return Errorf(http.StatusUnsupportedMediaType, "request body must be JSON")
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, max))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return Errorf(http.StatusRequestEntityTooLarge, "request body exceeds %d bytes", mbe.Limit)
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			// The body read deadline the server's guard sets passed.
			return Errorf(http.StatusRequestTimeout, "request body not received in time")
		}
		return Errorf(http.StatusBadRequest, "could not read request body")
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return Errorf(http.StatusBadRequest, "request body is required (a JSON object)")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return Errorf(http.StatusBadRequest, "invalid JSON body: %s", JSONErrorText(err))
	}
	if dec.More() {
		return Errorf(http.StatusBadRequest, "invalid JSON body: unexpected data after the JSON object")
	}
	// Every API text field at once: NUL cannot be stored in PostgreSQL,
	// and other controls have no business in names, tasks or mail.
	if err := safetext.JSON(body); err != nil {
		return Errorf(http.StatusBadRequest, "invalid JSON body: %s; text may hold only tab, line feed and carriage return", err)
	}
	return nil
}

// JSONErrorText describes a decoding failure without echoing the body.
func JSONErrorText(err error) string {
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

// PublicMessage returns the client-facing message of err when it is (or
// wraps) an *Error, and fallback otherwise: the text a caller may record or
// show without leaking an internal error.
func PublicMessage(err error, fallback string) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Message
	}
	if r, ok := domain.AsRefusal(err); ok {
		return r.Message
	}
	return fallback
}
