package emulator

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
)

// apiError is an AgentMail error response: {name, code, message, fix?, docs?}.
// Official SDKs discriminate errors by HTTP status only; clients built on the
// wire contract branch on code, so every error the emulator produces carries
// one of the documented codes.
type apiError struct {
	Status  int    `json:"-"`
	Name    string `json:"name"`
	Code    string `json:"code,omitempty"`
	Message string `json:"message"`
	Fix     string `json:"fix,omitempty"`
	Docs    string `json:"docs,omitempty"`
}

// Error implements the error interface.
func (e *apiError) Error() string {
	return strconv.Itoa(e.Status) + " " + e.Code + ": " + e.Message
}

func newAPIError(status int, name, code, message, fix string) *apiError {
	e := &apiError{Status: status, Name: name, Code: code, Message: message, Fix: fix}
	if code != "" {
		e.Docs = "https://docs.agentmail.to/errors#" + code
	}
	return e
}

func errValidation(msg string) *apiError {
	return newAPIError(http.StatusBadRequest, "ValidationError", "validation_error", msg, "Correct the request parameters and retry.")
}

func errNotFound(what string) *apiError {
	return newAPIError(http.StatusNotFound, "NotFoundError", "not_found", what+" not found", "Check the identifier; resources outside the API key's scope are reported as not found.")
}

// errMissingPermission keeps the legacy message "Forbidden" and names the
// permission in fix, as the real API does.
func errMissingPermission(perm string) *apiError {
	return newAPIError(http.StatusForbidden, "ForbiddenError", "missing_permission", "Forbidden", "Grant the "+perm+" permission to this API key.")
}

func errForbidden(msg, fix string) *apiError {
	return newAPIError(http.StatusForbidden, "ForbiddenError", "forbidden", msg, fix)
}

func errConflict(msg string) *apiError {
	return newAPIError(http.StatusConflict, "ConflictError", "conflict", msg, "Use a new Idempotency-Key for a different request, or retry later.")
}

func errUnprocessable(msg string) *apiError {
	return newAPIError(http.StatusUnprocessableEntity, "UnprocessableError", "unprocessable", msg, "")
}

func errTaken(msg string) *apiError {
	return newAPIError(http.StatusForbidden, "IsTakenError", "resource_taken", msg, "Choose a different name.")
}

func errMessageRejected(msg string) *apiError {
	return newAPIError(http.StatusForbidden, "MessageRejectedError", "message_rejected", msg, "")
}

func errUnauthorized(code, msg string) *apiError {
	return newAPIError(http.StatusUnauthorized, "UnauthorizedError", code, msg, "Send Authorization: Bearer <api key>.")
}

// errorNameForStatus picks the legacy error class name for a status when a
// fault injection names only a code.
func errorNameForStatus(status int) string {
	switch status {
	case 400:
		return "ValidationError"
	case 401:
		return "UnauthorizedError"
	case 403:
		return "ForbiddenError"
	case 404:
		return "NotFoundError"
	case 409:
		return "ConflictError"
	case 422:
		return "UnprocessableError"
	case 429:
		return "TooManyRequestsError"
	case 503:
		return "ServiceUnavailableError"
	}
	if status >= 500 {
		return "InternalServerError"
	}
	return "Error"
}

// marshalJSON encodes like the real API (a JavaScript service): "<", ">"
// and "&" stay literal instead of Go's \u003c escapes, which matters for
// Message-IDs.
func marshalJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := marshalJSON(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"name":"InternalServerError","code":"internal_error","message":"encode response"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func writeAPIError(w http.ResponseWriter, e *apiError) {
	if e.Status == http.StatusTooManyRequests && w.Header().Get("Retry-After") == "" {
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, e.Status, e)
}

// writeGatewayForbidden mimics the API gateway rejecting a credential before
// the API runs: a bare {"message":"Forbidden"} without name or code.
func writeGatewayForbidden(w http.ResponseWriter) {
	writeJSON(w, http.StatusForbidden, map[string]string{"message": "Forbidden"})
}

func writeNoContent(w http.ResponseWriter) {
	w.WriteHeader(http.StatusNoContent)
}
