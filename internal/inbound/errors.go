package inbound

import (
	"errors"

	"github.com/paperclipai/paperclipai/internal/agentmail"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/httpx"
)

// notice is a processing failure whose text is a fixed sentence, recorded
// as is on the delivery and shown to operators.
type notice string

func (n notice) Error() string { return string(n) }

// Processing failures recorded on deliveries.
const (
	errLeaseLost     notice = "Email worker lease changed; inspect delivery before retrying"
	errInboxStopped  notice = "Email inbox stopped"
	errInboxMismatch notice = "Email delivery inbox mismatch"
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
	if r, ok := domain.AsRefusal(err); ok {
		return r.Message
	}
	return genericFailure
}
