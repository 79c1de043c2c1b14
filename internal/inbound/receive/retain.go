package receive

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"strings"

	"github.com/paperclipai/paperclipai/internal/agentmail"
	"github.com/paperclipai/paperclipai/internal/attachment"
	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/inbound/queue"
	"github.com/paperclipai/paperclipai/internal/store"
)

// maxAttachmentsPerMessage bounds the attachments imported from one email.
const maxAttachmentsPerMessage = 20

// prepared holds a message's attachments, already downloaded and stored in
// the content-addressed store (each content in its own short transaction,
// outside the retention transaction, which then inserts only the rows
// naming them: so no lock is held while megabytes are written, and a
// retention retried after a failure finds the content already there), and
// the names of the ones that were omitted.
type prepared struct {
	stored  []storedAttachment
	omitted []string
}

type storedAttachment struct {
	filename, contentType, sha string
	size                       int64
}

// prepareAttachments imports a message's attachments within the count,
// size and type bounds. Bytes come only from the provider's pre-signed URL
// through the client's SSRF-guarded fetcher (https only; loopback only when
// the configured provider base itself is loopback, i.e. the emulator).
func (rv *Receiver) prepareAttachments(ctx context.Context, client *agentmail.Client, ep domain.EmailEndpoint, m *agentmail.Message) (*prepared, error) {
	p := &prepared{}
	max := rv.o.Attachments.MaxBytes
	for i, a := range m.Attachments {
		name := attachment.SanitizeFilename(a.Filename)
		ct := strings.TrimSpace(a.ContentType)
		if ct == "" {
			ct = "application/octet-stream"
		}
		if i >= maxAttachmentsPerMessage || rv.o.Attachments.DB == nil || max <= 0 || a.Size > max || !rv.o.Attachments.Allows(ct) {
			p.omitted = append(p.omitted, name)
			continue
		}
		loc, err := client.GetAttachment(ctx, ep.Address, m.MessageID, a.AttachmentID)
		if err != nil {
			return nil, err
		}
		if loc.Size > max {
			p.omitted = append(p.omitted, name)
			continue
		}
		dl, err := client.DownloadAttachment(ctx, loc.DownloadURL, max)
		if errors.Is(err, agentmail.ErrResponseTooLarge) {
			p.omitted = append(p.omitted, name)
			continue
		}
		if err != nil {
			return nil, err
		}
		sha, err := rv.o.Attachments.PutBytes(ctx, dl.Data)
		if errors.Is(err, attachment.ErrTooLarge) {
			p.omitted = append(p.omitted, name)
			continue
		}
		if err != nil {
			return nil, err
		}
		p.stored = append(p.stored, storedAttachment{filename: name, contentType: ct, sha: sha, size: int64(len(dl.Data))})
	}
	return p, nil
}

// retainAll retains, oldest first, every message of msgs that the inbox
// does not hold yet (have, read by the transaction's ReadThreadFacts;
// nothing else in a receiving transaction retains mail) and the provider
// did not filter. Links are created
// without a delivery, except the link of the trigger message, which is
// created already claimed by deliveryID (when both are set): that is the
// same row ClaimMessageLink would produce, written by the insert itself so
// the common case (a new message retained by its own delivery) costs no
// separate lookup and claim. claimedComment is the trigger's comment id when
// this call created its claimed link, "" otherwise (the message was
// retained before, as context or by another delivery, and the caller claims
// its existing link, which decides its one wake).
func (rv *Receiver) retainAll(ctx context.Context, tx *sql.Tx, ep domain.EmailEndpoint, conv domain.EmailConversation,
	msgs []*agentmail.Message, have map[string]bool, prep map[string]*prepared, trigger, deliveryID string) (claimedComment string, err error) {
	for _, m := range msgs {
		if have[m.MessageID] || queue.ProviderFiltered(m) {
			continue
		}
		claim := ""
		if trigger != "" && m.MessageID == trigger {
			claim = deliveryID
		}
		commentID, linked, err := rv.retain(ctx, tx, ep, conv, m, prep[m.MessageID], claim)
		if err != nil {
			return "", err
		}
		if claim != "" && linked {
			claimedComment = commentID
		}
	}
	return claimedComment, nil
}

// retain stores one email on its task: a system comment with the escaped
// text (so remote images cannot render), the attachments, a comment naming
// omitted attachments, the email_messages row (envelope with Bcc, extracted
// and full text, direction, automatic flag) and the message link, claimed
// by deliveryID when it is set. linked reports whether this call created
// the link.
func (rv *Receiver) retain(ctx context.Context, tx *sql.Tx, ep domain.EmailEndpoint, conv domain.EmailConversation,
	m *agentmail.Message, p *prepared, deliveryID string) (commentID string, linked bool, err error) {
	outbound := queue.HasLabel(m.Labels, "sent")
	direction, verb := "inbound", "Email from"
	if outbound {
		direction, verb = "outbound", "Email sent by"
	}
	text, full := bodyText(m, true), bodyText(m, false)
	body := "(No text body)"
	if text != "" {
		body = escapeMarkdown(text)
	}
	c := domain.Comment{CompanyID: ep.CompanyID, IssueID: conv.IssueID, AuthorKind: "system",
		Body: "**" + verb + " " + escapeMarkdown(m.From) + "**\n\n" + body}
	em := retainedMessage(ep, conv, m, direction, text, full)
	link := &store.EmailMessageLink{CompanyID: ep.CompanyID, EndpointID: ep.ID, ConversationID: conv.ID,
		DeliveryID: deliveryID, ProviderMessageID: m.MessageID, Direction: direction}
	if p == nil || (len(p.stored) == 0 && len(p.omitted) == 0) {
		// Most mail: comment, message and link together (one round trip
		// on PostgreSQL).
		_, linked, err = rv.st.RetainEmail(ctx, tx, &c, &em, link)
		return c.ID, linked, err
	}
	if err := rv.st.CreateComment(ctx, tx, &c); err != nil {
		return "", false, err
	}
	attIDs := []string{}
	for _, a := range p.stored {
		att := domain.Attachment{CompanyID: ep.CompanyID, IssueID: conv.IssueID, Filename: a.filename,
			ContentType: a.contentType, SizeBytes: a.size, SHA256: a.sha}
		if err := rv.st.CreateAttachment(ctx, tx, &att); err != nil {
			return "", false, err
		}
		attIDs = append(attIDs, att.ID)
	}
	if len(p.omitted) > 0 {
		names := make([]string, len(p.omitted))
		for i, n := range p.omitted {
			names[i] = escapeMarkdown(n)
		}
		oc := domain.Comment{CompanyID: ep.CompanyID, IssueID: conv.IssueID, AuthorKind: "system",
			Body: "Email attachments unavailable: " + strings.Join(names, ", ") + "."}
		if err := rv.st.CreateComment(ctx, tx, &oc); err != nil {
			return "", false, err
		}
	}
	em.AttachmentIDs, em.CommentID = attIDs, c.ID
	if _, err := rv.st.InsertEmailMessage(ctx, tx, &em); err != nil {
		return "", false, err
	}
	link.CommentID = c.ID
	linked, err = rv.st.InsertMessageLink(ctx, tx, link)
	return c.ID, linked, err
}

// retainedMessage is the email_messages row of m (envelope with Bcc,
// extracted and full text, direction, automatic flag), without its
// attachments and comment.
func retainedMessage(ep domain.EmailEndpoint, conv domain.EmailConversation, m *agentmail.Message, direction, text, full string) domain.EmailMessage {
	var headers json.RawMessage
	if len(m.Headers) > 0 {
		headers, _ = json.Marshal(m.Headers)
	}
	to := m.To
	if to == nil {
		to = []string{}
	}
	return domain.EmailMessage{CompanyID: ep.CompanyID, EndpointID: ep.ID, ConversationID: conv.ID,
		ProviderMessageID: m.MessageID, ProviderThreadID: m.ThreadID,
		Envelope: domain.EmailEnvelope{From: m.From, To: to, Cc: m.Cc, Bcc: m.Bcc, ReplyTo: m.ReplyTo, Subject: m.SubjectOrDefault()},
		Headers:  headers, Text: text, FullText: full, Direction: direction, Automatic: automatic(m),
		AttachmentIDs: []string{}, Timestamp: m.Timestamp}
}

// finishTx moves a delivery to a final state (processed or filtered).
func (rv *Receiver) finishTx(ctx context.Context, tx *sql.Tx, d *store.EmailDelivery, state domain.DeliveryState) error {
	return rv.finishTouching(ctx, tx, d, state, convTouch{})
}

// convTouch is the conversation activity recorded with a delivery's
// update (store.UpdateDeliveryTouching): the conversation and its new
// state ("" keeps it). The zero value touches nothing.
type convTouch struct{ id, state string }

// update writes d and records t, in one round trip on PostgreSQL.
func (t convTouch) update(ctx context.Context, rv *Receiver, tx *sql.Tx, d *store.EmailDelivery) error {
	return rv.st.UpdateDeliveryTouching(ctx, tx, d, t.id, t.state)
}

// finishTouching is finishTx that also records t.
func (rv *Receiver) finishTouching(ctx context.Context, tx *sql.Tx, d *store.EmailDelivery, state domain.DeliveryState, t convTouch) error {
	now := rv.st.Now()
	d.State, d.ProcessedAt, d.NextAttemptAt, d.RedactedError = state, &now, nil, ""
	return t.update(ctx, rv, tx, d)
}
