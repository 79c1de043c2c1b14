package outbound

import (
	"context"
	"strings"
	"time"

	"github.com/paperclipai/paperclipai/internal/authz"
	"github.com/paperclipai/paperclipai/internal/store"
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

// Deliveries lists a page of the inbound deliveries bound to a task's
// email conversation, in admission order (oldest first), under the same
// access rule as the thread: task readers, and agents only for their own
// inbox. A task with no email conversation has none. The cursor is that
// of the next page, nil on the last.
func (s *Service) Deliveries(ctx context.Context, a authz.Actor, companyID, issueID string, p store.Page) ([]InboundDelivery, *store.Cursor, error) {
	th, err := s.Thread(ctx, a, companyID, issueID)
	if err != nil {
		return nil, nil, err
	}
	out := []InboundDelivery{}
	if th == nil {
		return out, nil, nil
	}
	rows, err := s.Store.ListDeliveriesByConversation(ctx, s.Store.DB, th.ConversationID, p)
	if err != nil {
		return nil, nil, err
	}
	ds, next := store.TrimPage(rows, p, func(d store.EmailDelivery) store.Cursor { return store.Cursor{At: d.ReceivedAt, ID: d.ID} })
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
	return out, next, nil
}
