package domain

import (
	"errors"
	"fmt"
	"time"
)

// RefusalKind says why a service refused a request, in the service's own
// terms; only the API edge turns it into an HTTP status (httpx.StatusOf).
type RefusalKind int

// Refusal kinds. The zero value is KindInvalid so that a Refusal built
// without a kind is a plain "bad input" and never a server fault.
const (
	KindInvalid       RefusalKind = iota // the input is malformed or breaks a rule (400)
	KindForbidden                        // the actor may not do this (403)
	KindNotFound                         // the thing does not exist, or is not the actor's to see (404)
	KindConflict                         // the thing's current state does not allow it (409)
	KindTooLarge                         // the input exceeds a size limit (413)
	KindUnprocessable                    // well-formed but cannot be acted on as given (422)
	KindRateLimited                      // too many attempts; RetryAfter says when to try again (429)
	KindUpstream                         // the provider answered with a failure we pass on (502)
	KindUnavailable                      // a dependency is not available now (503)
)

// String names the kind for logs and tests.
func (k RefusalKind) String() string {
	switch k {
	case KindInvalid:
		return "invalid"
	case KindForbidden:
		return "forbidden"
	case KindNotFound:
		return "not_found"
	case KindConflict:
		return "conflict"
	case KindTooLarge:
		return "too_large"
	case KindUnprocessable:
		return "unprocessable"
	case KindRateLimited:
		return "rate_limited"
	case KindUpstream:
		return "upstream"
	case KindUnavailable:
		return "unavailable"
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// Refusal is a service's answer "no" to a request: a value the caller may
// show as is (Message is written for the person who asked, and never holds
// a secret), with a stable machine Code where clients branch on it.
// Anything that is not a Refusal is an internal fault.
type Refusal struct {
	Kind       RefusalKind
	Code       string         // stable machine-readable reason, e.g. "recipient_blocked"; may be empty
	Message    string         // for the person who asked
	Details    map[string]any // structured context for clients; JSON-encodable
	RetryAfter time.Duration  // with KindRateLimited or KindUnavailable: when to try again
}

// Error returns the message.
func (r *Refusal) Error() string { return r.Message }

// Refuse returns a Refusal of kind with a formatted message.
func Refuse(kind RefusalKind, format string, args ...any) *Refusal {
	return &Refusal{Kind: kind, Message: fmt.Sprintf(format, args...)}
}

// RefuseCode returns a Refusal of kind with a machine code and a message.
func RefuseCode(kind RefusalKind, code, message string) *Refusal {
	return &Refusal{Kind: kind, Code: code, Message: message}
}

// AsRefusal reports whether err is (or wraps) a Refusal, and returns it.
func AsRefusal(err error) (*Refusal, bool) {
	var r *Refusal
	if errors.As(err, &r) {
		return r, true
	}
	return nil, false
}

// IsRefusal reports whether err is (or wraps) a Refusal of one of kinds
// (of any kind when none is given).
func IsRefusal(err error, kinds ...RefusalKind) bool {
	r, ok := AsRefusal(err)
	if !ok {
		return false
	}
	if len(kinds) == 0 {
		return true
	}
	for _, k := range kinds {
		if r.Kind == k {
			return true
		}
	}
	return false
}
