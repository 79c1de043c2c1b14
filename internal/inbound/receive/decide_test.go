package receive

import (
	"testing"

	"github.com/paperclipai/paperclipai/internal/domain"
)

func TestDecide(t *testing.T) {
	retained := func(f facts) facts { f.known, f.retained, f.claimed = true, true, true; return f }
	for _, tc := range []struct {
		name string
		f    facts
		want action
	}{
		{"receipt in a new thread", facts{receipt: true}, actReceipt},
		{"receipt in a known thread", facts{receipt: true, known: true}, actReceipt},
		{"automatic receipt is still a receipt", facts{receipt: true, automatic: true}, actReceipt},
		{"new thread from a person", facts{}, actCreate},
		{"new thread, out-of-office", facts{automatic: true}, actDrop},
		{"our own echo in a new thread", facts{own: true}, actDrop},
		{"known thread, not yet retained", facts{known: true, status: domain.IssueTodo}, actRetain},
		{"reply to an open task", retained(facts{status: domain.IssueTodo}), actWake},
		{"reply to a task in review", retained(facts{status: domain.IssueInReview}), actWake},
		{"reply to a blocked task", retained(facts{status: domain.IssueBlocked}), actWake},
		{"reply to a done task", retained(facts{status: domain.IssueDone}), actReopen},
		{"reply to a reopened task", retained(facts{status: domain.IssueTodo, reopened: true}), actWake},
		{"reopen limited: still done", retained(facts{status: domain.IssueDone, reopened: true}), actKeep},
		{"task left done meanwhile and was cancelled", retained(facts{status: domain.IssueCancelled, reopened: true}), actKeep},
		{"auto-reply to a done task", retained(facts{automatic: true, status: domain.IssueDone}), actKeep},
		{"auto-reply to an open task", retained(facts{automatic: true, status: domain.IssueTodo}), actKeep},
		{"our own mail in a known thread", retained(facts{own: true, status: domain.IssueTodo}), actKeep},
		{"reply to a cancelled task", retained(facts{status: domain.IssueCancelled}), actKeep},
		{"context already claimed by another delivery", facts{known: true, retained: true, status: domain.IssueTodo}, actKeep},
		{"unclaimed context of a done task", facts{known: true, retained: true, status: domain.IssueDone}, actKeep},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := decide(tc.f); got != tc.want {
				t.Errorf("decide(%+v) = %v, want %v", tc.f, got, tc.want)
			}
		})
	}
}
