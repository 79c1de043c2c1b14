package ui

import (
	"testing"

	"github.com/paperclipai/paperclipai/internal/domain"
)

// Every send outcome has a badge, a tone and an explanation.
func TestTaskEmailOutcomeLabels(t *testing.T) {
	for _, o := range []domain.SendOutcome{domain.OutcomeQueued, domain.OutcomeSent, domain.OutcomeDelivered,
		domain.OutcomeFailed, domain.OutcomeUncertain} {
		if taskEmailOutcomeLabels[o] == "" || taskEmailOutcomeTones[o] == "" || taskEmailOutcomeText[o] == "" {
			t.Errorf("outcome %q lacks a label, tone or explanation", o)
		}
	}
	for _, s := range []string{domain.EndpointPaused, domain.EndpointDraft, domain.EndpointArchived} {
		if taskEmailInboxNotes[s] == "" {
			t.Errorf("inbox status %q has no note on the task page", s)
		}
	}
}
