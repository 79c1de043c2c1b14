package outbound

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/httpx"
	"github.com/paperclipai/paperclipai/internal/policy"
)

// TestRefusalKinds: each refusal of the send side is a *domain.Refusal
// whose kind the API edge answers with the status the routes always had,
// with its code, details and Retry-After.
func TestRefusalKinds(t *testing.T) {
	cases := []struct {
		name    string
		err     error
		status  int
		code    string
		message string
	}{
		{"bad input", badRequest("limit must be between 1 and %d", 200), http.StatusBadRequest, "", "limit must be between 1 and 200"},
		{"forbidden", forbidden("Email attachments must belong to the source task"), http.StatusForbidden, "", "Email attachments must belong to the source task"},
		{"not found", notFound("Email delivery not found"), http.StatusNotFound, "", "Email delivery not found"},
		{"conflict", conflict("This send is not uncertain"), http.StatusConflict, "", "This send is not uncertain"},
		{"blocked", recipientBlocked("a@b.example"), http.StatusForbidden, "recipient_blocked",
			"This inbox's send policy blocks the recipient a@b.example; the email was not sent"},
		{"paused", errThreadPaused, http.StatusConflict, "inbox_paused", errThreadPaused.Message},
		{"not awaiting", notAwaiting(domain.OutcomeSent), http.StatusConflict, "not_awaiting_review",
			"This email is no longer awaiting review (sent); nothing was sent"},
		{"policy denied", refusal(policy.Decision{Reason: "no mail on Sundays"}), http.StatusForbidden, "action_policy_denied",
			"Action policy denied this email: no mail on Sundays"},
		{"rate limited", refusal(policy.Decision{RateLimited: true, Reason: "2 per hour", RetryAfter: time.Minute}), http.StatusTooManyRequests,
			"email_rate_limited", "Email send limit reached: 2 per hour. Try again later."},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, ok := domain.AsRefusal(c.err)
			if !ok {
				t.Fatalf("%v is not a refusal", c.err)
			}
			he := httpx.FromRefusal(r)
			if he.Status != c.status || he.Code != c.code || he.Message != c.message {
				t.Errorf("answered %d %q %q, want %d %q %q", he.Status, he.Code, he.Message, c.status, c.code, c.message)
			}
		})
	}
	if r, _ := domain.AsRefusal(notAwaiting(domain.OutcomeRejected)); r.Details["outcome"] != domain.OutcomeRejected {
		t.Errorf("not awaiting review: details %v", r.Details)
	}
	if r, _ := domain.AsRefusal(refusal(policy.Decision{RateLimited: true, RetryAfter: time.Minute})); r.RetryAfter != time.Minute {
		t.Errorf("rate limited: retry after %v", r.RetryAfter)
	}
	if refusal(policy.Decision{Allowed: true}) != nil {
		t.Error("an allowed decision refuses")
	}
}

// TestVerdictTakesOnlyARefusalForNo: at execution, a refusal fails the
// send with its message; any other error (a check that could not be made)
// is a recheck.
func TestVerdictTakesOnlyARefusalForNo(t *testing.T) {
	if f := verdict(forbidden("The inbox is paused")); f.recheck || f.msg != "The inbox is paused" {
		t.Errorf("refusal: %+v", f)
	}
	if f := verdict(errors.New("database is gone")); !f.recheck {
		t.Errorf("fault: %+v", f)
	}
}
