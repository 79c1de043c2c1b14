package outbound

import "github.com/paperclipai/paperclipai/internal/domain"

// The send side's refusals are *domain.Refusal values: it speaks no HTTP,
// and the API edge (internal/api/outbound_routes.go) maps each kind to its
// status and the JSON error body; the MCP tools show the message.

// badRequest refuses malformed input or input that breaks a rule.
func badRequest(format string, args ...any) error {
	return domain.Refuse(domain.KindInvalid, format, args...)
}

// forbidden refuses an actor that may not do this.
func forbidden(msg string) error { return &domain.Refusal{Kind: domain.KindForbidden, Message: msg} }

// notFound refuses a thing that does not exist or is not the actor's to see.
func notFound(msg string) error { return &domain.Refusal{Kind: domain.KindNotFound, Message: msg} }

// conflict refuses a request the thing's current state does not allow.
func conflict(msg string) error { return &domain.Refusal{Kind: domain.KindConflict, Message: msg} }

// recipientBlocked refuses a send to a recipient the inbox's send policy
// blocks.
func recipientBlocked(addr string) error {
	return &domain.Refusal{Kind: domain.KindForbidden, Code: "recipient_blocked",
		Message: "This inbox's send policy blocks the recipient " + addr + "; the email was not sent"}
}
