// Package outbound sends email only through explicit, idempotent actions:
// a send or reply request is validated and authorized, stored with its
// immutable intent in one transaction before any provider contact, and
// executed by a worker that re-authorizes, keeps per-conversation order,
// reuses one provider idempotency key on every attempt and tracks the
// outcome (queued, sent, delivered, failed, uncertain).
package outbound

import (
	"net/mail"
	"strings"

	"github.com/paperclipai/paperclipai/internal/safetext"
	"github.com/paperclipai/paperclipai/internal/store"
)

// Limits of a send request (docs/email-pipeline.md, "Send requests").
const (
	maxRecipients  = 50
	maxAddressLen  = 320
	maxSubjectLen  = 998
	maxTextLen     = 100_000
	maxAttachments = 20
	maxMessageID   = 998
)

// SendRequest starts a new email conversation (with ParentIssueID, To and
// Subject) or replies in a bound one (with ConversationID and
// ReplyToMessageID).
type SendRequest struct {
	EndpointID       string   `json:"endpointId"`
	ParentIssueID    string   `json:"parentIssueId,omitempty"`
	ConversationID   string   `json:"conversationId,omitempty"`
	ReplyToMessageID string   `json:"replyToMessageId,omitempty"`
	ReplyAll         *bool    `json:"replyAll,omitempty"`
	To               []string `json:"to,omitempty"`
	Cc               []string `json:"cc,omitempty"`
	Bcc              []string `json:"bcc,omitempty"`
	Subject          *string  `json:"subject,omitempty"`
	Text             string   `json:"text"`
	AttachmentIDs    []string `json:"attachmentIds"`
	IdempotencyKey   string   `json:"idempotencyKey"`
}

// IsReply reports whether the request replies in a bound conversation.
func (r SendRequest) IsReply() bool { return r.ConversationID != "" }

// normalizeAddresses trims and validates a recipient list.
func normalizeAddresses(field string, in []string) ([]string, error) {
	if len(in) > maxRecipients {
		return nil, badRequest("%s may list at most %d recipients", field, maxRecipients)
	}
	out := make([]string, 0, len(in))
	for _, a := range in {
		a = strings.TrimSpace(a)
		addr, err := mail.ParseAddress(a)
		if a == "" || len(a) > maxAddressLen || err != nil || addr.Address != a || safetext.Token(a) != nil {
			return nil, badRequest("%s contains an invalid email address", field)
		}
		out = append(out, a)
	}
	return out, nil
}

// Validate checks every field and cross-field rule and normalizes the
// request in place (trimmed text and subject, default replyAll, empty
// attachment list).
func (r *SendRequest) Validate() error {
	if !store.ValidID(r.EndpointID) {
		return badRequest("endpointId must be a UUID")
	}
	if !store.ValidID(r.IdempotencyKey) {
		return badRequest("idempotencyKey must be a UUID")
	}
	if r.ParentIssueID != "" && !store.ValidID(r.ParentIssueID) {
		return badRequest("parentIssueId must be a UUID or a task identifier such as ACME-12")
	}
	if r.ConversationID != "" && !store.ValidID(r.ConversationID) {
		return badRequest("conversationId must be a UUID")
	}
	if r.ReplyToMessageID != "" && (len(r.ReplyToMessageID) > maxMessageID || safetext.Token(r.ReplyToMessageID) != nil) {
		return badRequest("replyToMessageId must be 1 to %d characters, without spaces or control characters", maxMessageID)
	}
	var err error
	if r.To, err = normalizeAddresses("to", r.To); err != nil {
		return err
	}
	if r.Cc, err = normalizeAddresses("cc", r.Cc); err != nil {
		return err
	}
	if r.Bcc, err = normalizeAddresses("bcc", r.Bcc); err != nil {
		return err
	}
	if r.Subject != nil {
		s := strings.TrimSpace(*r.Subject)
		if err := safetext.Line(*r.Subject); err != nil {
			return badRequest("subject must be one line: it %s", err)
		}
		if s == "" || len(s) > maxSubjectLen {
			return badRequest("subject must be 1 to %d characters", maxSubjectLen)
		}
		r.Subject = &s
	}
	r.Text = strings.TrimSpace(r.Text)
	if r.Text == "" || len(r.Text) > maxTextLen {
		return badRequest("text is required (at most %d characters)", maxTextLen)
	}
	if err := safetext.Text(r.Text); err != nil {
		return badRequest("text %s; only tab, line feed and carriage return are allowed", err)
	}
	if r.AttachmentIDs == nil {
		r.AttachmentIDs = []string{}
	}
	if len(r.AttachmentIDs) > maxAttachments {
		return badRequest("attachmentIds may list at most %d attachments", maxAttachments)
	}
	for _, id := range r.AttachmentIDs {
		if !store.ValidID(id) {
			return badRequest("attachmentIds must be UUIDs")
		}
	}
	if r.IsReply() {
		if r.ReplyToMessageID == "" {
			return badRequest("A reply requires its exact message ID")
		}
		if set := r.replyForbidden(); len(set) > 0 {
			return badRequest("A reply cannot set %s: reply recipients come from the original message (use replyAll to include its To and Cc), "+
				"its subject follows the thread, and it belongs to the conversation's own task", strings.Join(set, ", "))
		}
		if r.ReplyAll == nil {
			f := false
			r.ReplyAll = &f
		}
		return nil
	}
	var missing []string
	for _, f := range []struct {
		name  string
		unset bool
	}{{"parentIssueId", r.ParentIssueID == ""}, {"to", len(r.To) == 0}, {"subject", r.Subject == nil}} {
		if f.unset {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 {
		return badRequest("A new email requires a parent task, recipient, and subject; missing: %s", strings.Join(missing, ", "))
	}
	var replyOnly []string
	if r.ReplyToMessageID != "" {
		replyOnly = append(replyOnly, "replyToMessageId")
	}
	if r.ReplyAll != nil {
		replyOnly = append(replyOnly, "replyAll")
	}
	if len(replyOnly) > 0 {
		return badRequest("A new email cannot be a reply: %s needs conversationId (use email reply)", strings.Join(replyOnly, ", "))
	}
	return nil
}

// replyForbidden lists the fields a reply carries but may not set, in
// request order.
func (r *SendRequest) replyForbidden() []string {
	var set []string
	for _, f := range []struct {
		name string
		set  bool
	}{{"parentIssueId", r.ParentIssueID != ""}, {"to", len(r.To) > 0}, {"cc", len(r.Cc) > 0}, {"bcc", len(r.Bcc) > 0}, {"subject", r.Subject != nil}} {
		if f.set {
			set = append(set, f.name)
		}
	}
	return set
}

// addressOf extracts the bare address from "Name <addr>" forms.
func addressOf(s string) string {
	s = strings.TrimSpace(s)
	if a, err := mail.ParseAddress(s); err == nil {
		return a.Address
	}
	return strings.Trim(s, "<> ")
}

// ReplyRecipients computes a reply's recipients from the retained envelope:
// Reply-To when present, else From; with replyAll also the original To and
// Cc. Our own address is never included, duplicates are removed
// case-insensitively, and Bcc is never inherited.
func ReplyRecipients(from string, to, cc, replyTo []string, own string, replyAll bool) (outTo, outCc []string) {
	seen := map[string]bool{strings.ToLower(addressOf(own)): true}
	add := func(dst []string, list ...string) []string {
		for _, raw := range list {
			a := addressOf(raw)
			k := strings.ToLower(a)
			if a == "" || seen[k] {
				continue
			}
			seen[k] = true
			dst = append(dst, a)
		}
		return dst
	}
	var targets []string
	for _, r := range replyTo {
		if strings.TrimSpace(r) != "" {
			targets = append(targets, r)
		}
	}
	if len(targets) == 0 {
		targets = []string{from}
	}
	outTo = add(outTo, targets...)
	if replyAll {
		outTo = add(outTo, to...)
		outCc = add(outCc, cc...)
	}
	return outTo, outCc
}
