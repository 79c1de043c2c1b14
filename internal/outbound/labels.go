package outbound

import (
	"strings"

	"github.com/paperclipai/paperclipai/internal/agentmail"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/store"
)

// receiptErrorPrefix starts the error a failing receipt (bounce,
// complaint, rejection) leaves on its send: "AgentMail reported
// message.bounced".
const receiptErrorPrefix = "AgentMail reported "

// receiptError is the error a failing receipt of kind leaves on its send.
func receiptError(kind string) string { return receiptErrorPrefix + kind }

// receiptKinds maps a failing receipt's event to SendSummary.Receipt.
var receiptKinds = map[string]string{
	agentmail.EventMessageBounced:    "bounced",
	agentmail.EventMessageComplained: "complained",
	agentmail.EventMessageRejected:   "rejected",
}

// describeSend gives a send's outcome in plain words (SendSummary.Label)
// and, for a send that failed on a provider receipt, which one: a bounced
// or complained send went out, so "Not sent" would be untrue.
func describeSend(p store.EmailPublication) (string, *string) {
	switch p.Outcome {
	case domain.OutcomeQueued:
		return "Queued: not sent yet", nil
	case domain.OutcomeSent:
		return "Sent", nil
	case domain.OutcomeDelivered:
		return "Delivered", nil
	case domain.OutcomeUncertain:
		if p.State == domain.SendUnknown {
			return "Uncertain: may have been sent; an operator must resolve it", nil
		}
		return "Uncertain: may have been sent; retrying with the same key", nil
	case domain.OutcomeFailed:
		if kind, ok := strings.CutPrefix(p.Error, receiptErrorPrefix); ok {
			if r, ok := receiptKinds[kind]; ok {
				label := map[string]string{"bounced": "Sent, then bounced", "complained": "Delivered, then marked as spam by the recipient",
					"rejected": "Accepted, then rejected by AgentMail (not delivered)"}[r]
				return label, &r
			}
		}
		return "Not sent", nil
	case domain.OutcomeAwaitingReview:
		return "Awaiting review", nil
	case domain.OutcomeRejected:
		return "Rejected by a reviewer: not sent", nil
	case domain.OutcomeExpired:
		return "Review expired: not sent", nil
	}
	return string(p.Outcome), nil
}
