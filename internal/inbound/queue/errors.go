package queue

import (
	"errors"

	"github.com/paperclipai/paperclipai/internal/agentmail"
	"github.com/paperclipai/paperclipai/internal/domain"
)

// Notice is a processing failure whose text is a fixed sentence, recorded
// as is on the delivery and shown to operators.
type Notice string

func (n Notice) Error() string { return string(n) }

// Processing failures recorded on deliveries.
const (
	ErrLeaseLost     Notice = "Email worker lease changed; inspect delivery before retrying"
	ErrInboxStopped  Notice = "Email inbox stopped"
	ErrInboxMismatch Notice = "Email delivery inbox mismatch"
)

// GenericFailure is the text recorded for a failure that has no text safe
// to show.
const GenericFailure = "Email operation failed; retry or reconnect the inbox."

// Redact turns a processing error into text safe to store and show: the
// provider client's fixed descriptions, our own fixed messages, a
// service's refusal message, or a generic sentence; never provider text,
// URLs or keys.
func Redact(err error) string {
	var ae *agentmail.Error
	var ne *agentmail.NetworkError
	var re *agentmail.ResponseError
	var se *agentmail.StreamError
	var arg *agentmail.ArgumentError
	switch {
	case errors.As(err, &ae), errors.As(err, &ne), errors.As(err, &re), errors.As(err, &se), errors.As(err, &arg):
		return agentmail.Describe(err)
	case errors.Is(err, ErrLeaseLost), errors.Is(err, ErrInboxStopped), errors.Is(err, ErrInboxMismatch):
		return err.Error()
	}
	if r, ok := domain.AsRefusal(err); ok {
		return r.Message
	}
	return GenericFailure
}
