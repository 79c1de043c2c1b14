package outbound

import (
	"context"
	"strings"
	"time"

	"github.com/paperclipai/paperclipai/internal/authz"
)

// InboundDelivery is one admitted provider event of a task's email
// conversation with its stage timestamps: received_at is the durable
// admission, processedAt the end of processing, and admissionToWakeMs the
// time from admission to the committed wake request (nil when the event
// woke nobody). Times are the server's clock.
type InboundDelivery struct {
	ID                string     `json:"id"`
	EventKind         string     `json:"eventKind"`
	ProviderMessageID string     `json:"providerMessageId"`
	ProviderThreadID  string     `json:"providerThreadId"`
	Source            string     `json:"source"`
	State             string     `json:"state"`
	Attempts          int        `json:"attempts"`
	Error             *string    `json:"error"`
	ReceivedAt        time.Time  `json:"receivedAt"`
	ProcessedAt       *time.Time `json:"processedAt"`
	AdmissionToWakeMs *int64     `json:"admissionToWakeMs"`
	WakeRequestedAt   *time.Time `json:"wakeRequestedAt"`
}

// Deliveries lists the inbound deliveries bound to a task's email
// conversation, in admission order, under the same access rule as the
// thread: task readers, and agents only for their own inbox. A task with
// no email conversation has none.
func (s *Service) Deliveries(ctx context.Context, a authz.Actor, companyID, issueID string) ([]InboundDelivery, error) {
	th, err := s.Thread(ctx, a, companyID, issueID)
	if err != nil {
		return nil, err
	}
	out := []InboundDelivery{}
	if th == nil {
		return out, nil
	}
	ds, err := s.Store.ListDeliveriesByConversation(ctx, s.Store.DB, th.ConversationID)
	if err != nil {
		return nil, err
	}
	for _, d := range ds {
		// The deduplication key is "<event type>:<provider message id>"
		// (the event_kind column only says "message").
		kind, msgID, _ := strings.Cut(d.DeduplicationKey, ":")
		v := InboundDelivery{ID: d.ID, EventKind: kind, ProviderMessageID: msgID, ProviderThreadID: d.ProviderThreadID,
			Source: d.Source, State: string(d.State), Attempts: d.Attempts, ReceivedAt: d.ReceivedAt, ProcessedAt: d.ProcessedAt,
			AdmissionToWakeMs: d.AdmissionToWakeMs}
		if d.RedactedError != "" {
			e := d.RedactedError
			v.Error = &e
		}
		if d.AdmissionToWakeMs != nil {
			t := d.ReceivedAt.Add(time.Duration(*d.AdmissionToWakeMs) * time.Millisecond)
			v.WakeRequestedAt = &t
		}
		out = append(out, v)
	}
	return out, nil
}
