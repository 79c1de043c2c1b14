package httpx

import (
	"net/http"

	"github.com/paperclipai/paperclipai/internal/domain"
)

// StatusOf is the HTTP status of a refusal kind: the one place where a
// service's "no" becomes a status code.
func StatusOf(kind domain.RefusalKind) int {
	switch kind {
	case domain.KindForbidden:
		return http.StatusForbidden
	case domain.KindNotFound:
		return http.StatusNotFound
	case domain.KindConflict:
		return http.StatusConflict
	case domain.KindTooLarge:
		return http.StatusRequestEntityTooLarge
	case domain.KindUnprocessable:
		return http.StatusUnprocessableEntity
	case domain.KindRateLimited:
		return http.StatusTooManyRequests
	case domain.KindUpstream:
		return http.StatusBadGateway
	case domain.KindUnavailable:
		return http.StatusServiceUnavailable
	}
	return http.StatusBadRequest
}

// FromRefusal is the client-facing error of a service refusal.
func FromRefusal(r *domain.Refusal) *Error {
	return &Error{Status: StatusOf(r.Kind), Message: r.Message, Code: r.Code, Details: r.Details, RetryAfter: r.RetryAfter}
}
