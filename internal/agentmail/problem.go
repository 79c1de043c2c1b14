package agentmail

import (
	"errors"
	"math"
	"net/http"
)

// Problem codes of the email routes' error responses (docs/email-setup.md, "Provider errors").
const (
	ProblemAddressTaken  = "agentmail_address_taken"
	ProblemRequestFailed = "agentmail_request_failed"
)

// ProblemDetails is the "details" object of a provider-error response:
// only the allowlisted code, the provider status, the fixed operation name
// and, for a taken address, the offending request field.
type ProblemDetails struct {
	Code           string `json:"code"`
	ProviderStatus int    `json:"providerStatus"`
	Operation      string `json:"operation"`
	Field          string `json:"field,omitempty"`
}

// Problem is the HTTP response the email routes return for a provider
// failure: status, body {"error": Message, "code": Code, "details":
// Details}, and for 429 a Retry-After header of RetryAfterSeconds.
type Problem struct {
	// Status is the HTTP status for Paperclip's own response.
	Status int
	// Code is [ProblemAddressTaken] or [ProblemRequestFailed].
	Code string
	// Message is the user-facing, provider-text-free explanation.
	Message string
	// Details carries the safe diagnostics.
	Details ProblemDetails
	// RetryAfterSeconds is set (≥1) only when Status is 429.
	RetryAfterSeconds int
}

// ProblemFor maps a provider failure to the email routes' HTTP response,
// applying the rules of docs/email-setup.md, "Provider errors", in priority order. It returns false
// when err contains no provider [*Error]; Paperclip's own errors (for
// example a 403 for a missing permission) must pass through untouched.
func ProblemFor(err error) (Problem, bool) {
	var pe *Error
	if !errors.As(err, &pe) {
		return Problem{}, false
	}
	p := Problem{
		Status:  http.StatusUnprocessableEntity,
		Code:    ProblemRequestFailed,
		Details: ProblemDetails{Code: pe.Code, ProviderStatus: pe.Status, Operation: pe.Operation},
	}
	action := problemAction(pe.Operation)
	switch {
	case IsAddressTaken(pe):
		p.Status = http.StatusConflict
		p.Code = ProblemAddressTaken
		p.Details.Field = "username"
		p.Message = "This email address is already in use. Choose a different address."
	case pe.Code == CodeLimitExceeded:
		p.Message = "Your AgentMail account has reached its resource limit. Free up space in AgentMail or raise the plan limit, then try again."
	case pe.Code == CodeDomainNotVerified:
		p.Message = "This email domain is not verified in AgentMail. Verify the domain in AgentMail or choose another domain."
	case pe.Status == http.StatusUnauthorized || (pe.Status == http.StatusForbidden && (pe.Code == CodeUnknown || pe.Code == "")):
		// A bare 403 (no code) is AgentMail's gateway refusing the
		// credential before the API runs: a plain wrong key, not a
		// permission or an account limit (IsAuthFailure reads it the same).
		p.Message = "AgentMail rejected the API key. Check that the key is correct and still active, then try again."
	case pe.Status == http.StatusForbidden:
		p.Message = "AgentMail did not allow Paperclip to " + action + ". Check your API key permissions and AgentMail account limits, then try again."
	case pe.Status == http.StatusTooManyRequests:
		p.Status = http.StatusTooManyRequests
		p.RetryAfterSeconds = max(1, int(math.Ceil(pe.RetryAfter.Seconds())))
		p.Message = "AgentMail is rate limiting requests. Wait a moment, then try again."
	case pe.Operation == OpCreateInbox && (pe.Status == http.StatusBadRequest || pe.Status == http.StatusConflict || pe.Status == http.StatusUnprocessableEntity):
		p.Message = "AgentMail could not create this email address. Try a different address, or check your AgentMail settings."
	case pe.Status == http.StatusNotFound && pe.Operation == OpCreateInboxKey:
		p.Message = "AgentMail could not create an access key for this inbox. The email address was saved; try finishing the connection again."
	case pe.Status == http.StatusNotFound:
		p.Message = "AgentMail could not find the requested inbox or resource. Check the address and the API key's access, then try again."
	case pe.Status >= 500:
		p.Status = http.StatusBadGateway
		p.Message = "AgentMail is temporarily unavailable. Try again in a moment."
	default:
		p.Message = "AgentMail could not " + action + ". Check your AgentMail settings, then try again."
	}
	return p, true
}

// problemAction names what Paperclip was trying to do, per operation; the
// operations without a specific phrase use the generic one.
func problemAction(op string) string {
	switch op {
	case OpInspectKey:
		return "verify the API key"
	case OpCreateInbox:
		return "create the email address"
	case OpCreateInboxKey:
		return "create an inbox-scoped API key"
	case OpCreateWebhook:
		return "register the email webhook"
	}
	return "complete this request"
}
