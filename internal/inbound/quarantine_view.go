package inbound

import (
	"time"

	"github.com/paperclipai/paperclipai/internal/store"
)

// QuarantineItem is one quarantined message in a listing (docs/api.md,
// "Email").
type QuarantineItem struct {
	ID                string    `json:"id"`
	EndpointID        string    `json:"endpointId"`
	ProviderMessageID string    `json:"providerMessageId"`
	From              string    `json:"from"`
	Subject           string    `json:"subject"`
	ReceivedAt        time.Time `json:"receivedAt"`
	Reason            string    `json:"reason"`
	Detail            string    `json:"detail"`
}

// QuarantineMessage is one quarantined message with its text (null once
// purged) and its release.
type QuarantineMessage struct {
	QuarantineItem
	Text       *string    `json:"text"`
	Purged     bool       `json:"purged"`
	ReleasedAt *time.Time `json:"releasedAt"`
}

// QuarantineItemOf is the listing entry of m.
func QuarantineItemOf(m store.QuarantinedMessage) QuarantineItem {
	return QuarantineItem{ID: m.ID, EndpointID: m.EndpointID, ProviderMessageID: m.ProviderMessageID, From: m.From,
		Subject: m.Subject, ReceivedAt: m.ReceivedAt, Reason: m.Reason, Detail: m.Detail}
}

// QuarantineMessageOf is m with its text (none once purged) and release.
func QuarantineMessageOf(m store.QuarantinedMessage) QuarantineMessage {
	out := QuarantineMessage{QuarantineItem: QuarantineItemOf(m), Purged: m.PurgedAt != nil, ReleasedAt: m.ReleasedAt}
	if m.PurgedAt == nil {
		t := m.BodyText
		out.Text = &t
	}
	return out
}

// ReleaseResult is the answer of a release: the message, and whether this
// call released it (false: it was released before; nothing changed).
type ReleaseResult struct {
	QuarantineMessage
	Released bool `json:"released"`
}
