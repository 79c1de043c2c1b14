package agentmail

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Allowlisted AgentMail error codes. These are the only provider codes that
// ever leave this package; anything else the provider sends becomes
// [CodeUnknown].
const (
	CodeMissingAuthorization    = "missing_authorization"
	CodeInvalidTokenType        = "invalid_token_type"
	CodeUnknownAPIKey           = "unknown_api_key"
	CodeUnauthorized            = "unauthorized"
	CodeMissingPermission       = "missing_permission"
	CodePermissionEscalation    = "permission_escalation"
	CodeUnrestrictedKeyRequired = "unrestricted_key_required"
	CodeForbidden               = "forbidden"
	CodeValidationError         = "validation_error"
	CodeNotFound                = "not_found"
	CodeUnprocessable           = "unprocessable"
	CodeQueryRangeTooWide       = "query_range_too_wide"
	CodeAlreadyExists           = "already_exists"
	CodeResourceTaken           = "resource_taken"
	CodeLimitExceeded           = "limit_exceeded"
	CodeDomainNotVerified       = "domain_not_verified"
	CodeConflict                = "conflict"
	CodeRaceCondition           = "race_condition"
	CodeResourceDeleting        = "resource_deleting"
	CodeCannotDelete            = "cannot_delete"
	CodeMessageRejected         = "message_rejected"
	CodeRateLimitExceeded       = "rate_limit_exceeded"
	CodeServiceUnavailable      = "service_unavailable"
	CodeInternalError           = "internal_error"

	// CodeUnknown stands for a missing, unrecognized, oversized, stalled or
	// unreadable provider error body.
	CodeUnknown = "unknown"
)

var providerCodes = []string{
	CodeMissingAuthorization, CodeInvalidTokenType, CodeUnknownAPIKey, CodeUnauthorized,
	CodeMissingPermission, CodePermissionEscalation, CodeUnrestrictedKeyRequired, CodeForbidden,
	CodeValidationError, CodeNotFound, CodeUnprocessable, CodeQueryRangeTooWide,
	CodeAlreadyExists, CodeResourceTaken, CodeLimitExceeded, CodeDomainNotVerified,
	CodeConflict, CodeRaceCondition, CodeResourceDeleting, CodeCannotDelete,
	CodeMessageRejected, CodeRateLimitExceeded, CodeServiceUnavailable, CodeInternalError,
}

var providerCodeSet = func() map[string]struct{} {
	m := make(map[string]struct{}, len(providerCodes))
	for _, c := range providerCodes {
		m[c] = struct{}{}
	}
	return m
}()

// ProviderCodes returns the allowlisted AgentMail error codes in a fresh
// slice. [CodeUnknown] is not part of the list.
func ProviderCodes() []string {
	return append([]string(nil), providerCodes...)
}

// IsProviderCode reports whether code is one of the allowlisted AgentMail
// error codes.
func IsProviderCode(code string) bool {
	_, ok := providerCodeSet[code]
	return ok
}

// Retry-After bounds (docs/email-pipeline.md, "The provider client"): the header is clamped to this range and
// a missing or unparseable header means the minimum.
const (
	MinRetryAfter = time.Second
	MaxRetryAfter = 300 * time.Second
)

// Sentinel errors for the conditions callers branch on. A provider [*Error]
// matches them with errors.Is according to its HTTP status; a [*StreamError]
// matches [ErrUnauthorized] or [ErrForbidden] according to its name.
var (
	// ErrUnauthorized matches a provider 401: the key is missing, malformed
	// or unknown. Retrying with the same key cannot succeed.
	ErrUnauthorized = errors.New("agentmail: unauthorized")
	// ErrForbidden matches a provider 403 (permission, plan limit, taken
	// address, rejected message and similar; see [Error.Code]).
	ErrForbidden = errors.New("agentmail: forbidden")
	// ErrNotFound matches a provider 404. AgentMail also answers 404 for
	// resources outside the key's scope.
	ErrNotFound = errors.New("agentmail: not found")
	// ErrConflict matches a provider 409, for example an Idempotency-Key
	// reused with a different request or still in flight.
	ErrConflict = errors.New("agentmail: conflict")
	// ErrRateLimited matches a provider 429; [RetryAfter] gives the delay.
	ErrRateLimited = errors.New("agentmail: rate limited")
	// ErrServerError matches any provider status of 500 or above.
	ErrServerError = errors.New("agentmail: provider unavailable")
	// ErrInvalidArgument is matched by [*ArgumentError]: the call was
	// rejected locally and nothing was sent.
	ErrInvalidArgument = errors.New("agentmail: invalid argument")
	// ErrResponseTooLarge is matched by a [*ResponseError] whose body
	// exceeded the size cap.
	ErrResponseTooLarge = errors.New("agentmail: response too large")
	// ErrMalformedResponse is matched by a [*ResponseError] whose body could
	// not be decoded or lacked required fields.
	ErrMalformedResponse = errors.New("agentmail: malformed response")
	// ErrStreamClosed is matched by errors that end a [Stream]: the
	// connection closed, was dropped or failed.
	ErrStreamClosed = errors.New("agentmail: stream closed")
)

// Error is a non-2xx response from AgentMail. Its Error string has the fixed
// form "AgentMail request failed (<status>) [operation=<op>, code=<code>]"
// and never includes provider text.
type Error struct {
	// Status is the HTTP status code of the provider response.
	Status int
	// Operation is the fixed operation name (see [OperationFor]).
	Operation string
	// Code is an allowlisted provider code or [CodeUnknown].
	Code string
	// RetryAfter is the provider's Retry-After header clamped to
	// [MinRetryAfter, MaxRetryAfter]; it is MinRetryAfter when the header is
	// missing or unparseable.
	RetryAfter time.Duration
}

// Error returns the log-safe description of the failure.
func (e *Error) Error() string {
	return fmt.Sprintf("AgentMail request failed (%d) [operation=%s, code=%s]", e.Status, e.Operation, e.Code)
}

// Is makes the status sentinels ([ErrNotFound], [ErrRateLimited], ...)
// match errors.Is.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrUnauthorized:
		return e.Status == http.StatusUnauthorized
	case ErrForbidden:
		return e.Status == http.StatusForbidden
	case ErrNotFound:
		return e.Status == http.StatusNotFound
	case ErrConflict:
		return e.Status == http.StatusConflict
	case ErrRateLimited:
		return e.Status == http.StatusTooManyRequests
	case ErrServerError:
		return e.Status >= 500
	}
	return false
}

// LogValue renders the error for log/slog as its three safe fields.
func (e *Error) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("operation", e.Operation),
		slog.Int("status", e.Status),
		slog.String("code", e.Code),
	)
}

// Network failure reasons reported in [NetworkError.Reason]. The vocabulary
// is fixed so that no transport error text (which can quote response bytes)
// reaches a log line.
const (
	ReasonTimeout           = "timeout"
	ReasonCanceled          = "canceled"
	ReasonConnectionRefused = "connection_refused"
	ReasonConnectionReset   = "connection_reset"
	ReasonConnectionClosed  = "connection_closed"
	ReasonDNS               = "dns"
	ReasonTLS               = "tls"
	ReasonOther             = "other"
)

// NetworkError is a failure to complete an HTTP exchange with AgentMail:
// the connection could not be opened, broke, or the request timed out or was
// cancelled. No usable provider status is available.
type NetworkError struct {
	// Operation is the fixed operation name (see [OperationFor]).
	Operation string
	// Reason is one of the Reason* constants.
	Reason string
	// Sent is false only when no connection to AgentMail was ever obtained
	// for the request, so it certainly did not reach the provider. When true
	// (including a failure on a reused keep-alive connection) the provider
	// may or may not have acted on it.
	Sent bool
	err  error
}

// Error returns the log-safe description of the failure.
func (e *NetworkError) Error() string {
	sent := "no"
	if e.Sent {
		sent = "maybe"
	}
	return fmt.Sprintf("AgentMail request failed (network: %s) [operation=%s, sent=%s]", e.Reason, e.Operation, sent)
}

// Unwrap returns the underlying transport error with the request URL
// removed, so errors.Is(err, context.DeadlineExceeded) and similar checks
// work. Its text is not log-safe; log the NetworkError itself.
func (e *NetworkError) Unwrap() error { return e.err }

// Timeout reports whether the request timed out.
func (e *NetworkError) Timeout() bool { return e.Reason == ReasonTimeout }

// LogValue renders the error for log/slog as its safe fields.
func (e *NetworkError) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("operation", e.Operation),
		slog.String("network", e.Reason),
		slog.Bool("sent", e.Sent),
	)
}

// ResponseError is a 2xx response from AgentMail whose body could not be
// used: it was larger than the cap or did not decode into the expected
// shape. The provider did act on the request.
type ResponseError struct {
	// Operation is the fixed operation name (see [OperationFor]).
	Operation string
	// Status is the (successful) HTTP status of the response.
	Status int
	// Detail is a short, log-safe description such as "too_large",
	// "syntax_error", "type_mismatch in messages.to" or "missing message_id".
	Detail string
	kind   error
}

// Error returns the log-safe description of the failure.
func (e *ResponseError) Error() string {
	return fmt.Sprintf("AgentMail response unusable (%d) [operation=%s, detail=%s]", e.Status, e.Operation, e.Detail)
}

// Unwrap returns [ErrResponseTooLarge] or [ErrMalformedResponse].
func (e *ResponseError) Unwrap() error { return e.kind }

// ArgumentError is a call rejected before any network activity, for example
// an empty inbox id or an invalid idempotency key.
type ArgumentError struct {
	// Operation is the fixed operation name of the rejected call.
	Operation string
	// Reason is a short, log-safe description; it never quotes the value.
	Reason string
}

// Error returns the log-safe description of the failure.
func (e *ArgumentError) Error() string {
	return fmt.Sprintf("AgentMail request not sent [operation=%s]: %s", e.Operation, e.Reason)
}

// Unwrap returns [ErrInvalidArgument].
func (e *ArgumentError) Unwrap() error { return ErrInvalidArgument }

// IsNetworkError reports whether err contains a [*NetworkError].
func IsNetworkError(err error) bool {
	var ne *NetworkError
	return errors.As(err, &ne)
}

// MayHaveBeenSent reports whether the request that produced err may have
// reached AgentMail. It is false only for local argument errors and for
// network failures that happened before any connection was established; for
// every other error, including unrecognized ones, it conservatively returns
// true. Callers use it to tell a send that is certainly not delivered from
// one whose outcome is uncertain.
func MayHaveBeenSent(err error) bool {
	if err == nil {
		return false
	}
	var ae *ArgumentError
	if errors.As(err, &ae) {
		return false
	}
	var ne *NetworkError
	if errors.As(err, &ne) {
		return ne.Sent
	}
	return true
}

// IsTransient reports whether err is worth retrying with the same request
// and idempotency key (docs/email-pipeline.md, "The provider client"): a network failure, a 2xx response
// whose body was unusable, a provider 429, or a provider status of 500 or
// above. Every other provider status and every local error is permanent.
func IsTransient(err error) bool {
	var pe *Error
	if errors.As(err, &pe) {
		return pe.Status == http.StatusTooManyRequests || pe.Status >= 500
	}
	var ne *NetworkError
	if errors.As(err, &ne) {
		return true
	}
	var re *ResponseError
	return errors.As(err, &re)
}

// IsAuthFailure reports whether err means the credential itself was refused:
// a provider 401, or a 403 without a recognized code (the AgentMail gateway
// answers a wrong key with a bare 403 {"message":"Forbidden"}; a 403 whose
// body could not be inspected is treated the same, conservatively). A WebSocket handshake refused with
// 401 or 403, or an error frame naming an authorization failure, also
// counts. Reconnect loops must stop on it rather than retry the same key.
func IsAuthFailure(err error) bool {
	var pe *Error
	if errors.As(err, &pe) {
		if pe.Status == http.StatusUnauthorized {
			return true
		}
		if pe.Status == http.StatusForbidden {
			return pe.Code == CodeUnknown || pe.Operation == OpWebSocket
		}
		return false
	}
	var se *StreamError
	if errors.As(err, &se) {
		return se.Name == "UnauthorizedError" || se.Name == "ForbiddenError"
	}
	return false
}

// IsAddressTaken reports whether err is AgentMail refusing to create an
// inbox because the address is already in use (docs/email-pipeline.md, "The provider client": operation
// create_inbox, status 403/409/422, code resource_taken or already_exists).
func IsAddressTaken(err error) bool {
	var pe *Error
	if !errors.As(err, &pe) || pe.Operation != OpCreateInbox {
		return false
	}
	switch pe.Status {
	case http.StatusForbidden, http.StatusConflict, http.StatusUnprocessableEntity:
	default:
		return false
	}
	return pe.Code == CodeResourceTaken || pe.Code == CodeAlreadyExists
}

// RetryAfter returns the clamped Retry-After delay of a provider error and
// true, or zero and false when err contains no [*Error].
func RetryAfter(err error) (time.Duration, bool) {
	var pe *Error
	if errors.As(err, &pe) {
		return pe.RetryAfter, true
	}
	return 0, false
}

// Describe returns a log-safe one-line description of err. When err wraps an
// error from this package, the description is that error's own string, which
// drops any outer wrapping (outer context added by callers may quote ids or
// provider text). Errors that did not come from this package are described
// by their own Error string, which this package cannot vouch for.
func Describe(err error) string {
	if err == nil {
		return ""
	}
	var (
		pe *Error
		ne *NetworkError
		re *ResponseError
		ae *ArgumentError
		se *StreamError
		we *WebhookError
	)
	switch {
	case errors.As(err, &pe):
		return pe.Error()
	case errors.As(err, &ne):
		return ne.Error()
	case errors.As(err, &re):
		return re.Error()
	case errors.As(err, &ae):
		return ae.Error()
	case errors.As(err, &se):
		return se.Error()
	case errors.As(err, &we):
		return we.Error()
	}
	return err.Error()
}

// parseRetryAfter interprets a Retry-After header: delta seconds (a decimal
// fraction is tolerated) or an HTTP date relative to now. The result is
// clamped to [MinRetryAfter, MaxRetryAfter]; anything unparseable yields
// MinRetryAfter.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return MinRetryAfter
	}
	var d time.Duration
	if isDecimalSeconds(v) {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return MinRetryAfter
		}
		// Clamp in float space first: converting an out-of-range float to
		// time.Duration is implementation-defined in Go.
		if f >= MaxRetryAfter.Seconds() {
			return MaxRetryAfter
		}
		d = time.Duration(f * float64(time.Second))
	} else if t, err := http.ParseTime(v); err == nil {
		d = t.Sub(now)
	} else {
		return MinRetryAfter
	}
	return min(max(d, MinRetryAfter), MaxRetryAfter)
}

// isDecimalSeconds accepts "9", "9.5" and similar; it rejects signs,
// exponents, hex and everything else strconv.ParseFloat would also take.
func isDecimalSeconds(v string) bool {
	dot := false
	digits := 0
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c >= '0' && c <= '9':
			digits++
		case c == '.' && !dot:
			dot = true
		default:
			return false
		}
	}
	return digits > 0
}

// newNetworkError classifies a transport error. The *url.Error wrapper is
// dropped because its text quotes the request URL, which contains inbox and
// message ids.
func newNetworkError(op string, err error, sent bool) *NetworkError {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return &NetworkError{Operation: op, Reason: classifyNetworkError(err), Sent: sent, err: err}
}

func classifyNetworkError(err error) string {
	var (
		netErr  net.Error
		dnsErr  *net.DNSError
		certErr *tls.CertificateVerificationError
		recErr  tls.RecordHeaderError
		authErr x509.UnknownAuthorityError
		hostErr x509.HostnameError
		alert   tls.AlertError
	)
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return ReasonTimeout
	case errors.Is(err, context.Canceled):
		return ReasonCanceled
	case errors.As(err, &dnsErr):
		return ReasonDNS
	case errors.Is(err, syscall.ECONNREFUSED):
		return ReasonConnectionRefused
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return ReasonConnectionReset
	case errors.As(err, &certErr), errors.As(err, &recErr), errors.As(err, &authErr),
		errors.As(err, &hostErr), errors.As(err, &alert):
		return ReasonTLS
	case errors.As(err, &netErr) && netErr.Timeout():
		return ReasonTimeout
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed):
		return ReasonConnectionClosed
	}
	return ReasonOther
}
