package email

import (
	"strings"
	"testing"

	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/store"
)

// A failed or refused run is described in plain words, its quoted parts
// bounded.
func TestRunProblemMessage(t *testing.T) {
	for _, c := range []struct {
		p    store.EmailRunProblem
		want string
	}{
		{store.EmailRunProblem{IssueTitle: "Quote", Status: domain.RunFailed, Error: "process exited with code 1"},
			`The agent's last run on the email task "Quote" failed: process exited with code 1. Its mail may be unanswered`},
		{store.EmailRunProblem{IssueTitle: "Quote", Status: domain.RunRefused, RefusalReason: "low_trust_requires_sandbox_environment"},
			`"Quote" was refused: a low-trust agent runs only in an active sandbox environment, and it has none.`},
		{store.EmailRunProblem{IssueTitle: "Quote", Status: domain.RunRefused, RefusalReason: "something_new"}, `was refused: something_new.`},
		{store.EmailRunProblem{IssueTitle: "Quote", Status: domain.RunTimedOut, Error: "run timed out"}, `"Quote" timed out: run timed out.`},
	} {
		if got := runProblemMessage(c.p); !strings.Contains(got, c.want) {
			t.Errorf("%+v: %q does not contain %q", c.p, got, c.want)
		}
	}
	long := runProblemMessage(store.EmailRunProblem{IssueTitle: strings.Repeat("é", 1000), Status: domain.RunFailed})
	if strings.Count(long, "é") != maxReasonLen || !strings.Contains(long, "…") {
		t.Errorf("a long title is not clipped: %d", strings.Count(long, "é"))
	}
}
