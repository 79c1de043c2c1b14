package emulator

import (
	"encoding/base64"
	"fmt"
	"net/mail"
	"sort"
	"strings"
	"time"
)

// receiveLocked stores an inbound message in ib and emits its
// message.received[.variant] event. A message whose Message-ID the inbox
// already holds is not stored twice; the existing one is returned.
func (s *Server) receiveLocked(ib *inbox, in *inboundMail) *message {
	defer s.markDirty()
	now := s.state.now()
	if in.messageID == "" {
		dom := domainPart(in.from)
		if dom == "" {
			dom = "emulator.invalid"
		}
		in.messageID = "<" + randomAlnum(24) + "@" + dom + ">"
	}
	if m := s.state.messages[msgKey{ib.id, in.messageID}]; m != nil {
		return m
	}
	ts := in.date
	if ts.IsZero() {
		ts = now
	}
	ts = ts.UTC().Truncate(time.Millisecond)

	labels := []string{"received", "unread"}
	if strings.EqualFold(strings.TrimSpace(headerValue(in.headers, "X-Spam-Flag")), "YES") {
		labels = append(labels, "spam")
	}
	if strings.EqualFold(strings.TrimSpace(headerValue(in.headers, "X-Emulator-Auth")), "fail") {
		labels = append(labels, "unauthenticated")
	}
	// A reply to the inbox's own mail is checked against the reply lists
	// only, other mail against the receive lists.
	direction := "receive"
	if s.isReplyToOwnLocked(ib, in.inReplyTo) {
		direction = "reply"
	}
	if s.listVerdictLocked(ib, in.from, direction) {
		labels = append(labels, "blocked")
	}
	for _, l := range normalizeLabels(in.labels) {
		labels = addLabel(labels, l)
	}

	to := in.to
	if len(to) == 0 {
		to = []string{ib.id}
	}
	m := &message{
		inboxID: ib.id, messageID: in.messageID, labels: labels,
		timestamp: ts, createdAt: now, updatedAt: now,
		from: in.from, to: copyStrings(to), cc: copyStrings(in.cc), replyTo: copyStrings(in.replyTo),
		subject: in.subject, text: in.text, html: in.html,
		inReplyTo: in.inReplyTo, references: copyStrings(in.references),
		headers: in.headers, raw: in.raw, attachments: in.attachments,
	}
	if m.text != "" {
		m.extractedText = extractReplyText(m.text)
		m.preview = makePreview(m.text)
	}
	if m.html != "" {
		m.extractedHTML = extractReplyHTML(m.html)
	}
	m.size = len(in.raw)
	if m.size == 0 {
		m.size = estimateSize(m)
	}
	s.state.storeMessageLocked(m, "")

	typ := evReceived
	switch {
	case m.hasLabel("blocked"):
		typ = evReceivedBlocked
	case m.hasLabel("spam"):
		typ = evReceivedSpam
	case m.hasLabel("unauthenticated"):
		typ = evReceivedUnauth
	}
	s.publishLocked(s.receivedEventLocked(ib, m, typ))
	return m
}

func headerValue(h map[string]string, key string) string {
	if v, ok := h[key]; ok {
		return v
	}
	for k, v := range h {
		if strings.EqualFold(k, key) {
			return v
		}
	}
	return ""
}

func estimateSize(m *message) int {
	n := len(m.text) + len(m.html) + len(m.subject) + len(m.from) + 200
	for _, h := range m.headers {
		n += len(h) + 4
	}
	for _, a := range m.attachments {
		n += len(a.data) * 4 / 3
	}
	return n
}

// DeliverRequest is the body of POST /_emulator/inboxes/{inbox_id}/deliver:
// one inbound email from outside.
type DeliverRequest struct {
	From        string              `json:"from"`
	To          []string            `json:"to,omitempty"`
	Cc          []string            `json:"cc,omitempty"`
	ReplyTo     []string            `json:"reply_to,omitempty"`
	Subject     string              `json:"subject"`
	Text        string              `json:"text,omitempty"`
	HTML        string              `json:"html,omitempty"`
	Headers     map[string]string   `json:"headers,omitempty"`
	Labels      []string            `json:"labels,omitempty"`
	MessageID   string              `json:"message_id,omitempty"`
	InReplyTo   string              `json:"in_reply_to,omitempty"`
	References  []string            `json:"references,omitempty"`
	Date        string              `json:"date,omitempty"`
	Attachments []DeliverAttachment `json:"attachments,omitempty"`
}

// DeliverAttachment is one attachment of a DeliverRequest.
type DeliverAttachment struct {
	Filename      string `json:"filename"`
	ContentType   string `json:"content_type"`
	ContentBase64 string `json:"content_base64"`
}

// DeliverResult identifies the stored inbound message.
type DeliverResult struct {
	MessageID string `json:"message_id"`
	ThreadID  string `json:"thread_id"`
}

// toInbound validates a deliver request and converts it.
func (d *DeliverRequest) toInbound(inboxAddr string) (*inboundMail, error) {
	if strings.TrimSpace(d.From) == "" {
		return nil, fmt.Errorf("from is required")
	}
	if _, err := mail.ParseAddress(d.From); err != nil {
		return nil, fmt.Errorf("from: invalid address %q", d.From)
	}
	in := &inboundMail{
		from: d.From, to: d.To, cc: d.Cc, replyTo: d.ReplyTo, subject: d.Subject,
		text: d.Text, html: d.HTML, labels: d.Labels,
		messageID: normalizeMsgID(d.MessageID), inReplyTo: normalizeMsgID(d.InReplyTo),
		headers: map[string]string{},
	}
	for _, r := range d.References {
		if id := normalizeMsgID(r); id != "" {
			in.references = append(in.references, id)
		}
	}
	if d.Date != "" {
		t, err := time.Parse(time.RFC3339Nano, d.Date)
		if err != nil {
			t, err = mail.ParseDate(d.Date)
		}
		if err != nil {
			return nil, fmt.Errorf("date: want RFC 3339 or RFC 5322, got %q", d.Date)
		}
		in.date = t
	}
	for i, a := range d.Attachments {
		data, err := base64.StdEncoding.DecodeString(a.ContentBase64)
		if err != nil {
			return nil, fmt.Errorf("attachments[%d].content_base64: %w", i, err)
		}
		ct := a.ContentType
		if ct == "" {
			ct = "application/octet-stream"
		}
		in.attachments = append(in.attachments, &attachment{
			id: "att_" + randomAlnum(20), filename: a.Filename, contentType: ct, disposition: "attachment", data: data,
		})
	}
	to := d.To
	if len(to) == 0 {
		to = []string{inboxAddr}
	}
	// The headers map mirrors what a parsed RFC 5322 message would carry.
	in.headers["From"] = d.From
	in.headers["To"] = strings.Join(to, ", ")
	if len(d.Cc) > 0 {
		in.headers["Cc"] = strings.Join(d.Cc, ", ")
	}
	if len(d.ReplyTo) > 0 {
		in.headers["Reply-To"] = strings.Join(d.ReplyTo, ", ")
	}
	in.headers["Subject"] = d.Subject
	if !in.date.IsZero() {
		in.headers["Date"] = in.date.Format(time.RFC1123Z)
	}
	if in.inReplyTo != "" {
		in.headers["In-Reply-To"] = in.inReplyTo
	}
	if len(in.references) > 0 {
		in.headers["References"] = strings.Join(in.references, " ")
	}
	keys := make([]string, 0, len(d.Headers))
	for k := range d.Headers {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		in.headers[k] = d.Headers[k]
	}
	return in, nil
}

// Deliver stores one inbound email in the inbox with address inboxID, as
// POST /_emulator/inboxes/{inbox_id}/deliver does.
func (s *Server) Deliver(inboxID string, req DeliverRequest) (DeliverResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ib := s.state.lookupInbox(inboxID)
	if ib == nil {
		return DeliverResult{}, fmt.Errorf("deliver: %w: %s", ErrNoSuchInbox, inboxID)
	}
	in, err := req.toInbound(ib.id)
	if err != nil {
		return DeliverResult{}, fmt.Errorf("deliver: %w", err)
	}
	if in.messageID == "" {
		in.messageID = "<" + randomAlnum(24) + "@" + orDefault(domainPart(in.from), "emulator.invalid") + ">"
	}
	if in.headers != nil {
		in.headers["Message-ID"] = in.messageID
	}
	m := s.receiveLocked(ib, in)
	return DeliverResult{MessageID: m.messageID, ThreadID: m.threadID}, nil
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
