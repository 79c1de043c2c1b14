package inbound

import (
	"errors"

	"github.com/paperclipai/paperclipai/internal/agentmail"
	"github.com/paperclipai/paperclipai/internal/httpx"
)

// Processing errors recorded (redacted) on deliveries.
var (
	errLeaseLost     = errors.New("Email worker lease changed; inspect delivery before retrying")
	errInboxStopped  = errors.New("Email inbox stopped")
	errInboxMismatch = errors.New("Email delivery inbox mismatch")
)

const genericFailure = "Email operation failed; retry or reconnect the inbox."

// redact turns a processing error into text safe to store and show: the
// provider client's fixed descriptions, our own fixed messages, or a
// generic sentence; never provider text, URLs or keys.
func redact(err error) string {
	var ae *agentmail.Error
	var ne *agentmail.NetworkError
	var re *agentmail.ResponseError
	var se *agentmail.StreamError
	var arg *agentmail.ArgumentError
	var apiErr *httpx.Error
	switch {
	case errors.As(err, &ae), errors.As(err, &ne), errors.As(err, &re), errors.As(err, &se), errors.As(err, &arg):
		return agentmail.Describe(err)
	case errors.Is(err, errLeaseLost), errors.Is(err, errInboxStopped), errors.Is(err, errInboxMismatch):
		return err.Error()
	case errors.As(err, &apiErr):
		return apiErr.Message
	}
	return genericFailure
}
