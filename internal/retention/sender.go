package retention

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/mail"
	"slices"
	"strings"

	"github.com/paperclipai/paperclipai/internal/db"
	"github.com/paperclipai/paperclipai/internal/domain"
)

// RemovedOnRequest replaces the body of a task comment made from a message
// that purge-sender removed.
const RemovedOnRequest = "[email content removed on request]"

// PurgedTitle replaces the title of a task made from an email (its
// subject) when purge-sender removes that email's content.
const PurgedTitle = "Email (purged)"

// finalSendOutcomes are the outcomes after which a send's stored request
// is never read to send it again; purge-sender blanks only those (a send
// still queued, uncertain or awaiting review keeps its text, or it would
// go out empty).
var finalSendOutcomes = []domain.SendOutcome{domain.OutcomeSent, domain.OutcomeDelivered, domain.OutcomeFailed,
	domain.OutcomeRejected, domain.OutcomeExpired}

// PurgeSender removes the retained email content sent from or to address
// in every company (a data-subject request, docs/deployment.md, "Data
// retention"). Of each such message: its text, headers and attachments
// (purgeMessages), its subject and every display name in its envelope
// (the bare addresses stay, as the message row's addressing), the body
// of the task comment an inbound message became, the provider event it
// came from, and the search index's copy. Of its conversation: the
// subject, and the title of the task the conversation made from it
// (PurgedTitle; the task stays). Of the sends to the address (by their
// recipients, the message they published, or the message they answer):
// the text and subject of the stored request and of a reviewer's edits.
// Quarantined messages from the address lose their subject and text.
// Each company with such messages gets an audit line naming who asked
// and a hash of the address (not the address itself).
func (s *Service) PurgeSender(ctx context.Context, address, requestedBy string) (map[string]Report, error) {
	a, err := mail.ParseAddress(address)
	if err != nil {
		return nil, fmt.Errorf("not an email address: %q", address)
	}
	addr := strings.ToLower(a.Address)
	like := "%" + addr + "%"
	byCompany := map[string][]string{}
	// Candidates by a text search of the envelope, then an exact match of
	// each parsed address, so "bob@example.com" never matches
	// "alibob@example.com".
	// A message whose content the retention purge removed still has its
	// subject and names.
	for _, purged := range []string{"IS NULL", "IS NOT NULL"} {
		err = s.scan(ctx, `SELECT id, company_id, envelope FROM email_messages
			WHERE content_purged_at `+purged+` AND LOWER(CAST(envelope AS TEXT)) LIKE $1`, []any{like}, func(id, company string, raw []byte) {
			var env domain.EmailEnvelope
			if json.Unmarshal(raw, &env) == nil && envelopeHas(env, addr) && (purged == "IS NULL" || !envelopeBare(env)) {
				byCompany[company] = append(byCompany[company], id)
			}
		})
		if err != nil {
			return nil, fmt.Errorf("find messages: %w", err)
		}
	}
	// New sends to the address name it in their request, or in a
	// reviewer's edit of it (replies are found by their messages below).
	sendsByCompany := map[string][]string{}
	for _, column := range []string{"request", "approved_request"} {
		err = s.scan(ctx, `SELECT publication_id, company_id, CAST(`+column+` AS TEXT) FROM email_sends
			WHERE outcome IN (`+outcomeList()+`) AND LOWER(COALESCE(CAST(`+column+` AS TEXT), '')) LIKE $1`,
			[]any{like}, func(id, company string, raw []byte) {
				var req struct {
					To, Cc, Bcc []string
					Subject     *string
					Text        *string
				}
				if json.Unmarshal(raw, &req) == nil && !sendPurged(req.Subject, req.Text) && envelopeHas(domain.EmailEnvelope{To: req.To, Cc: req.Cc, Bcc: req.Bcc}, addr) &&
					!slices.Contains(sendsByCompany[company], id) {
					sendsByCompany[company] = append(sendsByCompany[company], id)
				}
			})
		if err != nil {
			return nil, fmt.Errorf("find sends: %w", err)
		}
	}
	// Quarantined messages from the address not blanked yet (the
	// quarantine's own expiry keeps the subject and the sender's name).
	quarantinedByCompany := map[string][]string{}
	err = s.scan(ctx, `SELECT id, company_id, from_address FROM email_quarantine
		WHERE LOWER(from_address) LIKE $1 AND (subject <> '' OR body_text IS NOT NULL OR from_address LIKE '%<%')`,
		[]any{like}, func(id, company string, raw []byte) {
			if envelopeHas(domain.EmailEnvelope{From: string(raw)}, addr) {
				quarantinedByCompany[company] = append(quarantinedByCompany[company], id)
			}
		})
	if err != nil {
		return nil, fmt.Errorf("find quarantined messages: %w", err)
	}
	companies := map[string]bool{}
	for _, m := range []map[string][]string{byCompany, sendsByCompany, quarantinedByCompany} {
		for c := range m {
			companies[c] = true
		}
	}
	sum := sha256.Sum256([]byte(addr))
	out := map[string]Report{}
	for company := range companies {
		var r Report
		err := s.Store.Tx(ctx, func(tx *sql.Tx) error {
			for _, id := range byCompany[company] {
				if err := s.purgeSubjectOf(ctx, tx, &r, id); err != nil {
					return err
				}
				if err := s.purgeMessages(ctx, tx, &r, `id = $1 AND content_purged_at IS NULL`, id); err != nil {
					return err
				}
			}
			for _, id := range sendsByCompany[company] {
				if err := s.purgeSend(ctx, tx, &r, id); err != nil {
					return err
				}
			}
			for _, id := range quarantinedByCompany[company] {
				if _, err := tx.ExecContext(ctx, `UPDATE email_quarantine SET from_address = $2, subject = '', body_text = NULL,
					purged_at = COALESCE(purged_at, $3) WHERE id = $1`, id, addr, s.Store.Now()); err != nil {
					return fmt.Errorf("purge a quarantined message: %w", err)
				}
				r.Quarantined++
			}
			return nil
		})
		if err != nil {
			return out, err
		}
		out[company] = r
		if err := s.audit(ctx, company, "retention.purged_sender", r, map[string]any{"requestedBy": requestedBy,
			"addressSha256": hex.EncodeToString(sum[:])}); err != nil {
			return out, err
		}
	}
	if len(companies) > 0 && s.db().Dialect == db.SQLite {
		// An FTS5 update leaves the old words in the index's older
		// segments until they merge; merging them all now removes them.
		if _, err := s.db().ExecContext(ctx, `INSERT INTO search_fts (search_fts) VALUES ('optimize')`); err != nil {
			return out, fmt.Errorf("compact the search index: %w", err)
		}
	}
	return out, nil
}

// scan runs a query of (id, company, JSON) rows and hands each to fn.
func (s *Service) scan(ctx context.Context, query string, args []any, fn func(id, company string, raw []byte)) error {
	rows, err := s.db().QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id, company string
		var raw []byte
		if err := rows.Scan(&id, &company, &raw); err != nil {
			return err
		}
		fn(id, company, raw)
	}
	return rows.Err()
}

// outcomeList is finalSendOutcomes as SQL string literals.
func outcomeList() string {
	var out []string
	for _, o := range finalSendOutcomes {
		out = append(out, "'"+string(o)+"'")
	}
	return strings.Join(out, ", ")
}

// purgeSubjectOf removes, for one message about to be purged, what
// purgeMessages leaves: the envelope's subject and display names, the
// comment it became, the provider event it came from, its conversation's
// subject and the title of the task made from it, the sends that
// published it or answer it, and the search index's copy of the subject
// and names.
func (s *Service) purgeSubjectOf(ctx context.Context, tx *sql.Tx, r *Report, id string) error {
	var raw []byte
	var convID, endpointID, providerID string
	if err := tx.QueryRowContext(ctx, `SELECT envelope, conversation_id, endpoint_id, provider_message_id FROM email_messages WHERE id = $1`,
		id).Scan(&raw, &convID, &endpointID, &providerID); err != nil {
		return fmt.Errorf("read the message: %w", err)
	}
	var env domain.EmailEnvelope
	if err := json.Unmarshal(raw, &env); err != nil {
		return fmt.Errorf("read the message's envelope: %w", err)
	}
	if !envelopeBare(env) {
		r.Subjects++
	}
	env = bareEnvelope(env)
	envJSON, err := json.Marshal(env)
	if err != nil {
		return fmt.Errorf("encode the envelope: %w", err)
	}
	steps := []struct {
		what, query string
		args        []any
	}{
		{"the message's envelope", `UPDATE email_messages SET envelope = $2 WHERE id = $1`, []any{id, string(envJSON)}},
		// The task comment an inbound message became quotes it: the
		// comment row stays, so the task's history keeps its shape.
		{"the message's comment", `UPDATE issue_comments SET body = $2 WHERE id = (SELECT comment_id FROM email_messages WHERE id = $1)`,
			[]any{id, RemovedOnRequest}},
		// The provider event of a delivery that is done (one in flight
		// still needs it, and is retried from it).
		{"the message's provider event", `UPDATE email_deliveries SET normalized_event = '{}'
			WHERE id IN (SELECT delivery_id FROM email_message_links WHERE endpoint_id = $1 AND provider_message_id = $2 AND delivery_id IS NOT NULL)
			AND state IN ('processed', 'filtered', 'failed')`, []any{endpointID, providerID}},
		{"the conversation's subject", `UPDATE email_conversations SET subject = '' WHERE id = $1`, []any{convID}},
		// Tasks made from email (inbound threads and new sends) are titled
		// with the subject; a task an email was sent from keeps its own.
		{"the task's title", `UPDATE issues SET title = $2 WHERE origin_kind = 'chat_channel' AND title <> $2
			AND id = (SELECT issue_id FROM email_conversations WHERE id = $1)`, []any{convID, PurgedTitle}},
	}
	for _, st := range steps {
		if _, err := tx.ExecContext(ctx, st.query, st.args...); err != nil {
			return fmt.Errorf("purge %s: %w", st.what, err)
		}
	}
	if s.db().Dialect == db.SQLite {
		if _, err := tx.ExecContext(ctx, `UPDATE search_fts SET title = '',
			sender = COALESCE((SELECT json_extract(envelope, '$.from') FROM email_messages WHERE id = $1), ''),
			recipients = COALESCE((SELECT json_extract(envelope, '$.to') FROM email_messages WHERE id = $1), '') || ' ' ||
				COALESCE((SELECT json_extract(envelope, '$.cc') FROM email_messages WHERE id = $1), '')
			WHERE rowid = (SELECT rid FROM search_docs WHERE doc_id = $1)`, id); err != nil {
			return fmt.Errorf("purge the message's search entry: %w", err)
		}
	}
	// The sends that published this message (outbound) or answer it.
	rows, err := tx.QueryContext(ctx, `SELECT s.publication_id, s.request FROM email_sends s JOIN email_publications p ON p.id = s.publication_id
		WHERE p.endpoint_id = $1 AND p.conversation_id = $2 AND s.outcome IN (`+outcomeList()+`)`, endpointID, convID)
	if err != nil {
		return fmt.Errorf("find the message's sends: %w", err)
	}
	var sends []string
	for rows.Next() {
		var pubID string
		var req []byte
		if err := rows.Scan(&pubID, &req); err != nil {
			rows.Close()
			return err
		}
		var r struct {
			ReplyToMessageID string `json:"replyToMessageId"`
		}
		_ = json.Unmarshal(req, &r)
		if r.ReplyToMessageID == providerID {
			sends = append(sends, pubID)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	var published sql.NullString
	err = tx.QueryRowContext(ctx, `SELECT id FROM email_publications WHERE endpoint_id = $1 AND provider_message_id = $2`,
		endpointID, providerID).Scan(&published)
	if err != nil && err != sql.ErrNoRows {
		return fmt.Errorf("find the message's publication: %w", err)
	}
	if published.Valid {
		sends = append(sends, published.String)
	}
	for _, pubID := range sends {
		if err := s.purgeSend(ctx, tx, r, pubID); err != nil {
			return err
		}
	}
	return nil
}

// purgeSend blanks the text and subject of a finished send's stored
// request, of a reviewer's approved version, and the review's record of
// the edits; the recipients, outcome and times stay.
func (s *Service) purgeSend(ctx context.Context, tx *sql.Tx, r *Report, pubID string) error {
	var req []byte
	var approved sql.NullString
	var outcome string
	err := tx.QueryRowContext(ctx, `SELECT request, CAST(approved_request AS TEXT), outcome FROM email_sends WHERE publication_id = $1`,
		pubID).Scan(&req, &approved, &outcome)
	if err == sql.ErrNoRows {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read the send: %w", err)
	}
	final := false
	for _, o := range finalSendOutcomes {
		final = final || outcome == string(o)
	}
	var cur, edit struct {
		Subject *string
		Text    *string
	}
	_ = json.Unmarshal(req, &cur)
	if approved.Valid {
		_ = json.Unmarshal([]byte(approved.String), &edit)
	}
	if !final || (sendPurged(cur.Subject, cur.Text) && sendPurged(edit.Subject, edit.Text)) {
		return nil // in flight, or purged already
	}
	blank := func(raw []byte, keepText bool) (string, error) {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(raw, &m); err != nil {
			return "", fmt.Errorf("decode the send's request: %w", err)
		}
		delete(m, "subject")
		if keepText {
			m["text"] = json.RawMessage(`""`)
		} else {
			delete(m, "text")
		}
		b, err := json.Marshal(m)
		return string(b), err
	}
	newReq, err := blank(req, true)
	if err != nil {
		return err
	}
	var newApproved any
	if approved.Valid && approved.String != "" {
		v, err := blank([]byte(approved.String), false)
		if err != nil {
			return err
		}
		newApproved = v
	}
	if _, err := tx.ExecContext(ctx, `UPDATE email_sends SET request = $2, approved_request = $3 WHERE publication_id = $1`,
		pubID, newReq, newApproved); err != nil {
		return fmt.Errorf("purge the send's request: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE email_send_reviews SET changes = NULL WHERE publication_id = $1`, pubID); err != nil {
		return fmt.Errorf("purge the send's review edits: %w", err)
	}
	r.Sends++
	return nil
}

// bareAddresses is list with every display name dropped ("Alice
// <alice@example.com>" is "alice@example.com"); never nil.
func bareAddresses(list []string) []string {
	out := make([]string, 0, len(list))
	for _, v := range list {
		if a, err := mail.ParseAddress(v); err == nil {
			v = a.Address
		} else if i := strings.LastIndexByte(v, '<'); i >= 0 {
			v = strings.Trim(v[i:], "<> ")
		}
		out = append(out, v)
	}
	return out
}

// bareEnvelope is env without its subject and display names.
func bareEnvelope(env domain.EmailEnvelope) domain.EmailEnvelope {
	return domain.EmailEnvelope{From: bareAddresses([]string{env.From})[0], To: bareAddresses(env.To), Cc: bareAddresses(env.Cc),
		Bcc: bareAddresses(env.Bcc), ReplyTo: bareAddresses(env.ReplyTo)}
}

// envelopeBare reports whether env has no subject and no display name
// left (purge-sender has been through it).
func envelopeBare(env domain.EmailEnvelope) bool {
	b := bareEnvelope(env)
	return env.Subject == "" && env.From == b.From && slices.Equal(env.To, b.To) && slices.Equal(env.Cc, b.Cc) &&
		slices.Equal(env.Bcc, b.Bcc) && slices.Equal(env.ReplyTo, b.ReplyTo)
}

// sendPurged reports whether a send request (or a reviewer's version)
// has no content left: no subject and no or an empty text.
func sendPurged(subject, text *string) bool {
	return subject == nil && (text == nil || *text == "")
}

// envelopeHas reports whether addr is one of the envelope's addresses.
func envelopeHas(env domain.EmailEnvelope, addr string) bool {
	all := append([]string{env.From}, env.To...)
	all = append(all, env.Cc...)
	all = append(all, env.Bcc...)
	all = append(all, env.ReplyTo...)
	for _, v := range all {
		if a, err := mail.ParseAddress(v); err == nil && strings.EqualFold(a.Address, addr) {
			return true
		}
		if strings.EqualFold(strings.TrimSpace(v), addr) {
			return true
		}
	}
	return false
}
