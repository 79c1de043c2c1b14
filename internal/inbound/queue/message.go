package queue

import (
	"net/mail"
	"strings"
	"time"

	"github.com/paperclipai/paperclipai/internal/agentmail"
	"github.com/paperclipai/paperclipai/internal/safetext"
)

// Provider text is repaired, not refused, on intake: an email's sender
// cannot be asked to resend, and a NUL left in a subject or body makes the
// PostgreSQL insert fail on every attempt, so the delivery would retry
// forever without a task. Everything the provider supplies passes through
// CleanEvent (at admission) and CleanMessage (right after each fetch)
// before any of it is compared, stored or shown; bodies keep tabs and line
// breaks, one-line values (subject, addresses, ids, labels, headers,
// attachment names) lose their line breaks too (safetext.CleanText,
// safetext.CleanLine). Ids are cleaned the same way everywhere, so a
// message keeps matching its own deliveries and links.

// CleanEvent repairs the provider strings of an admitted event.
func CleanEvent(ev *agentmail.Event) {
	ev.Kind = safetext.CleanLine(ev.Kind)
	ev.InboxID = safetext.CleanLine(ev.InboxID)
	ev.MessageID = safetext.CleanLine(ev.MessageID)
	ev.EventID = safetext.CleanLine(ev.EventID)
	ev.ThreadID = safetext.CleanLine(ev.ThreadID)
	safetext.CleanLines(ev.Labels)
	safetext.CleanLines(ev.Recipients)
	for i := range ev.BounceRecipients {
		r := &ev.BounceRecipients[i]
		r.Address, r.Status = safetext.CleanLine(r.Address), safetext.CleanLine(r.Status)
	}
	ev.ReceiptType = safetext.CleanLine(ev.ReceiptType)
	ev.ReceiptSubType = safetext.CleanLine(ev.ReceiptSubType)
	ev.RejectReason = safetext.CleanText(ev.RejectReason)
}

// CleanMessage repairs, in place, the provider strings of a fetched
// message and returns it (nil stays nil). It is idempotent.
func CleanMessage(m *agentmail.Message) *agentmail.Message {
	if m == nil {
		return nil
	}
	m.InboxID = safetext.CleanLine(m.InboxID)
	m.ThreadID = safetext.CleanLine(m.ThreadID)
	m.MessageID = safetext.CleanLine(m.MessageID)
	safetext.CleanLines(m.Labels)
	m.From = safetext.CleanLine(m.From)
	safetext.CleanLines(m.ReplyTo)
	safetext.CleanLines(m.To)
	safetext.CleanLines(m.Cc)
	safetext.CleanLines(m.Bcc)
	m.Subject = safetext.CleanLine(m.Subject)
	m.Preview = safetext.CleanText(m.Preview)
	m.Text = safetext.CleanText(m.Text)
	m.HTML = safetext.CleanText(m.HTML)
	m.ExtractedText = safetext.CleanText(m.ExtractedText)
	m.ExtractedHTML = safetext.CleanText(m.ExtractedHTML)
	for i := range m.Attachments {
		a := &m.Attachments[i]
		// The attachment id names the provider's object in a URL path and
		// is never stored: it stays as the provider wrote it.
		a.Filename = safetext.CleanLine(a.Filename)
		a.ContentType = safetext.CleanLine(a.ContentType)
		a.ContentDisposition = safetext.CleanLine(a.ContentDisposition)
		a.ContentID = safetext.CleanLine(a.ContentID)
	}
	m.InReplyTo = safetext.CleanLine(m.InReplyTo)
	safetext.CleanLines(m.References)
	if len(m.Headers) > 0 {
		h := make(map[string]string, len(m.Headers))
		for k, v := range m.Headers {
			h[safetext.CleanLine(k)] = safetext.CleanLine(v)
		}
		m.Headers = h
	}
	return m
}

// ProviderFiltered reports whether the provider classified the message as
// spam, blocked, unauthenticated or trash: such mail never starts work.
func ProviderFiltered(m *agentmail.Message) bool {
	for _, l := range m.Labels {
		switch strings.ToLower(l) {
		case "spam", "blocked", "unauthenticated", "trash":
			return true
		}
	}
	return false
}

// HasLabel reports whether labels hold want, ignoring case.
func HasLabel(labels []string, want string) bool {
	for _, l := range labels {
		if strings.EqualFold(l, want) {
			return true
		}
	}
	return false
}

// SenderAddress returns the lower-cased bare address of a From value such
// as "Jane <jane@example.com>".
func SenderAddress(from string) string {
	if a, err := mail.ParseAddress(from); err == nil {
		return strings.ToLower(a.Address)
	}
	s := strings.TrimSpace(from)
	if i := strings.LastIndexByte(s, '<'); i >= 0 {
		s = strings.TrimSuffix(s[i+1:], ">")
	}
	return strings.ToLower(strings.TrimSpace(s))
}

// ReceiptTime is when the provider received m (created_at), falling back
// to the sender's Date when the provider gave none.
func ReceiptTime(m *agentmail.Message) time.Time {
	if !m.CreatedAt.IsZero() {
		return m.CreatedAt
	}
	return m.Timestamp
}

// BeforeCutoff reports whether a provider receipt time lies before the
// activation cutoff. The provider reports times with millisecond
// precision while the cutoff has microseconds, so the cutoff is truncated
// first: mail received in the activation's own millisecond is admitted
// rather than silently dropped.
func BeforeCutoff(receipt, cutoff time.Time) bool {
	return receipt.Before(cutoff.Truncate(time.Millisecond))
}
