package email

import (
	"errors"
	"net/http"
	"testing"

	"github.com/paperclipai/paperclipai/internal/agentmail"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/httpx"
)

// TestProblemKindRoundTrip: a provider problem's status, turned into a
// refusal kind here and back into a status at the API edge, is the status
// agentmail.ProblemFor chose.
func TestProblemKindRoundTrip(t *testing.T) {
	for _, status := range []int{http.StatusBadRequest, http.StatusForbidden, http.StatusNotFound, http.StatusConflict,
		http.StatusRequestEntityTooLarge, http.StatusUnprocessableEntity, http.StatusTooManyRequests,
		http.StatusBadGateway, http.StatusServiceUnavailable} {
		if got := httpx.StatusOf(problemKind(status)); got != status {
			t.Errorf("status %d: kind %s answers %d", status, problemKind(status), got)
		}
	}
}

// TestProviderErrorIsRefusal: every provider failure the email routes
// quote becomes a refusal with the problem's status, code and details; an
// error that is not the provider's passes through untouched.
func TestProviderErrorIsRefusal(t *testing.T) {
	cases := []struct {
		name   string
		err    error
		status int
	}{
		{"address taken", &agentmail.Error{Status: http.StatusConflict, Code: agentmail.CodeAlreadyExists, Operation: agentmail.OpCreateInbox}, http.StatusConflict},
		{"rate limited", &agentmail.Error{Status: http.StatusTooManyRequests, Operation: agentmail.OpInspectKey}, http.StatusTooManyRequests},
		{"provider down", &agentmail.Error{Status: http.StatusInternalServerError, Operation: agentmail.OpInspectKey}, http.StatusBadGateway},
		{"bad key", &agentmail.Error{Status: http.StatusUnauthorized, Operation: agentmail.OpInspectKey}, http.StatusUnprocessableEntity},
		{"unreachable", &agentmail.NetworkError{Operation: agentmail.OpInspectKey, Reason: "timeout"}, http.StatusBadGateway},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, ok := domain.AsRefusal(providerError(c.err))
			if !ok {
				t.Fatalf("providerError(%v) is not a refusal", c.err)
			}
			if got := httpx.StatusOf(r.Kind); got != c.status {
				t.Errorf("status %d, want %d", got, c.status)
			}
			if r.Code == "" || r.Message == "" || r.Details["operation"] == "" {
				t.Errorf("refusal %+v lacks its code, message or operation", r)
			}
		})
	}
	plain := errors.New("database is gone")
	if got := providerError(plain); got != plain {
		t.Errorf("providerError changed a non-provider error: %v", got)
	}
}
