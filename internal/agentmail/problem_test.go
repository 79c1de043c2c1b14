package agentmail

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestProblemFor covers the provider-error HTTP mapping (docs/email-setup.md,
// "Provider errors") and the error scenarios that concern it.
func TestProblemFor(t *testing.T) {
	t.Parallel()
	type want struct {
		status     int
		code       string
		contains   string
		absent     string
		field      string
		retryAfter int
	}
	cases := []struct {
		name string
		err  *Error
		want want
	}{
		{"13.2/1 create_inbox_key 404", &Error{Status: 404, Operation: OpCreateInboxKey, Code: CodeNotFound},
			want{422, ProblemRequestFailed, "could not create an access key for this inbox. The email address was saved; try finishing the connection again.", "different address", "", 0}},
		{"13.2/2 resource_taken 403", &Error{Status: 403, Operation: OpCreateInbox, Code: CodeResourceTaken},
			want{409, ProblemAddressTaken, "This email address is already in use. Choose a different address.", "", "username", 0}},
		{"13.2/2 already_exists 403", &Error{Status: 403, Operation: OpCreateInbox, Code: CodeAlreadyExists},
			want{409, ProblemAddressTaken, "This email address is already in use.", "", "username", 0}},
		{"resource_taken 409", &Error{Status: 409, Operation: OpCreateInbox, Code: CodeResourceTaken},
			want{409, ProblemAddressTaken, "already in use", "", "username", 0}},
		{"resource_taken 422", &Error{Status: 422, Operation: OpCreateInbox, Code: CodeAlreadyExists},
			want{409, ProblemAddressTaken, "already in use", "", "username", 0}},
		{"resource_taken 400 is not taken", &Error{Status: 400, Operation: OpCreateInbox, Code: CodeResourceTaken},
			want{422, ProblemRequestFailed, "Try a different address", "already in use", "", 0}},
		{"13.2/3 resource_taken on create_inbox_key", &Error{Status: 403, Operation: OpCreateInboxKey, Code: CodeResourceTaken},
			want{422, ProblemRequestFailed, "create an inbox-scoped API key", "already in use", "", 0}},
		{"limit_exceeded", &Error{Status: 403, Operation: OpCreateInbox, Code: CodeLimitExceeded},
			want{422, ProblemRequestFailed, "resource limit", "", "", 0}},
		{"domain_not_verified", &Error{Status: 403, Operation: OpCreateInbox, Code: CodeDomainNotVerified},
			want{422, ProblemRequestFailed, "Verify the domain", "", "", 0}},
		{"13.2/4 create_inbox 401", &Error{Status: 401, Operation: OpCreateInbox, Code: CodeUnknownAPIKey},
			want{422, ProblemRequestFailed, "rejected the API key", "", "", 0}},
		{"13.2/4 create_inbox 403", &Error{Status: 403, Operation: OpCreateInbox, Code: CodeMissingPermission},
			want{422, ProblemRequestFailed, "AgentMail did not allow Paperclip to create the email address. Check your API key permissions and AgentMail account limits, then try again.", "", "", 0}},
		{"13.2/4 create_inbox 400", &Error{Status: 400, Operation: OpCreateInbox, Code: CodeValidationError},
			want{422, ProblemRequestFailed, "Try a different address", "", "", 0}},
		{"13.2/4 create_inbox 409", &Error{Status: 409, Operation: OpCreateInbox, Code: CodeUnknown},
			want{422, ProblemRequestFailed, "Try a different address", "", "", 0}},
		{"13.2/4 create_inbox 422", &Error{Status: 422, Operation: OpCreateInbox, Code: CodeUnprocessable},
			want{422, ProblemRequestFailed, "Try a different address", "", "", 0}},
		{"13.2/4 create_inbox 404", &Error{Status: 404, Operation: OpCreateInbox, Code: CodeNotFound},
			want{422, ProblemRequestFailed, "could not find", "", "", 0}},
		{"13.2/4 create_inbox 429", &Error{Status: 429, Operation: OpCreateInbox, Code: CodeRateLimitExceeded, RetryAfter: 12 * time.Second},
			want{429, ProblemRequestFailed, "rate limiting", "", "", 12}},
		{"429 rounds up", &Error{Status: 429, Operation: OpListInboxes, Code: CodeUnknown, RetryAfter: 1500 * time.Millisecond},
			want{429, ProblemRequestFailed, "rate limiting", "", "", 2}},
		{"13.2/4 create_inbox 503", &Error{Status: 503, Operation: OpCreateInbox, Code: CodeServiceUnavailable},
			want{502, ProblemRequestFailed, "AgentMail is temporarily unavailable. Try again in a moment.", "", "", 0}},
		{"13.2/5 create_inbox_key 403", &Error{Status: 403, Operation: OpCreateInboxKey, Code: CodeMissingPermission},
			want{422, ProblemRequestFailed, "AgentMail did not allow Paperclip to create an inbox-scoped API key.", "different address", "", 0}},
		{"13.2/6 inspect 401", &Error{Status: 401, Operation: OpInspectKey, Code: CodeUnauthorized},
			want{422, ProblemRequestFailed, "rejected the API key", "", "", 0}},
		// A bare 403 is AgentMail's gateway refusing a wrong key: never
		// "permissions or account limits".
		{"inspect bare 403", &Error{Status: 403, Operation: OpInspectKey, Code: CodeUnknown},
			want{422, ProblemRequestFailed, "AgentMail rejected the API key. Check that the key is correct and still active, then try again.", "permission", "", 0}},
		{"webhook 403", &Error{Status: 403, Operation: OpCreateWebhook, Code: CodeMissingPermission},
			want{422, ProblemRequestFailed, "register the email webhook", "", "", 0}},
		{"request 403", &Error{Status: 403, Operation: OpRequest, Code: CodeForbidden},
			want{422, ProblemRequestFailed, "complete this request", "", "", 0}},
		{"send 404", &Error{Status: 404, Operation: OpSendMessage, Code: CodeNotFound},
			want{422, ProblemRequestFailed, "could not find the requested inbox or resource", "", "", 0}},
		{"else 400", &Error{Status: 400, Operation: OpInspectKey, Code: CodeValidationError},
			want{422, ProblemRequestFailed, "AgentMail could not verify the API key. Check your AgentMail settings", "", "", 0}},
		{"else 409 send", &Error{Status: 409, Operation: OpSendMessage, Code: CodeConflict},
			want{422, ProblemRequestFailed, "could not complete this request", "", "", 0}},
	}
	for _, c := range cases {
		// Wrapping must not hide the provider error.
		p, ok := ProblemFor(fmt.Errorf("setup: %w", c.err))
		if !ok {
			t.Errorf("%s: not mapped", c.name)
			continue
		}
		if p.Status != c.want.status || p.Code != c.want.code || p.RetryAfterSeconds != c.want.retryAfter {
			t.Errorf("%s: got status=%d code=%s retry=%d", c.name, p.Status, p.Code, p.RetryAfterSeconds)
		}
		if !strings.Contains(p.Message, c.want.contains) {
			t.Errorf("%s: message %q lacks %q", c.name, p.Message, c.want.contains)
		}
		if c.want.absent != "" && strings.Contains(p.Message, c.want.absent) {
			t.Errorf("%s: message %q contains %q", c.name, p.Message, c.want.absent)
		}
		wantDetails := ProblemDetails{Code: c.err.Code, ProviderStatus: c.err.Status, Operation: c.err.Operation, Field: c.want.field}
		if p.Details != wantDetails {
			t.Errorf("%s: details %+v, want %+v", c.name, p.Details, wantDetails)
		}
		b, _ := json.Marshal(p.Details)
		var keys map[string]any
		_ = json.Unmarshal(b, &keys)
		wantKeys := 3
		if c.want.field != "" {
			wantKeys = 4
		}
		if len(keys) != wantKeys {
			t.Errorf("%s: details JSON %s", c.name, b)
		}
	}
}

// TestProblemForPassesOwnErrorsThrough: Paperclip's own
// errors are not provider errors and are not mapped.
func TestProblemForPassesOwnErrorsThrough(t *testing.T) {
	t.Parallel()
	if _, ok := ProblemFor(errors.New("Missing permission: tools:manage_connections")); ok {
		t.Fatal("own error mapped")
	}
	if _, ok := ProblemFor(&NetworkError{Operation: OpCreateInbox, Reason: ReasonTimeout}); ok {
		t.Fatal("network error mapped as a provider response")
	}
	if _, ok := ProblemFor(nil); ok {
		t.Fatal("nil mapped")
	}
}
