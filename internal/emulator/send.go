package emulator

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/mail"
	"path"
	"regexp"
	"strings"
	"time"
)

// addrList accepts a single address string or an array of them.
type addrList []string

// UnmarshalJSON implements json.Unmarshaler for string-or-array fields.
func (a *addrList) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if string(b) == "null" {
		*a = nil
		return nil
	}
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*a = addrList{s}
		return nil
	}
	var list []string
	if err := json.Unmarshal(b, &list); err != nil {
		return err
	}
	*a = list
	return nil
}

type sendAttachment struct {
	Filename           string `json:"filename"`
	ContentType        string `json:"content_type"`
	ContentDisposition string `json:"content_disposition"`
	ContentID          string `json:"content_id"`
	Content            string `json:"content"`
	URL                string `json:"url"`
}

// Request bodies, one per endpoint, so strict decoding rejects fields the
// endpoint does not define (e.g. subject on reply).
type (
	sendCommon struct {
		Labels      []string          `json:"labels"`
		ReplyTo     addrList          `json:"reply_to"`
		Text        string            `json:"text"`
		HTML        string            `json:"html"`
		Attachments []sendAttachment  `json:"attachments"`
		Headers     map[string]string `json:"headers"`
		TrackOpens  *bool             `json:"track_opens"`
	}
	sendRequest struct {
		sendCommon
		To      addrList `json:"to"`
		Cc      addrList `json:"cc"`
		Bcc     addrList `json:"bcc"`
		Subject string   `json:"subject"`
	}
	replyRequest struct {
		sendCommon
		To       addrList `json:"to"`
		Cc       addrList `json:"cc"`
		Bcc      addrList `json:"bcc"`
		ReplyAll *bool    `json:"reply_all"`
	}
	replyAllRequest struct {
		sendCommon
	}
)

// OutboxMessage is mail sent to an address the emulator does not host.
type OutboxMessage struct {
	MessageID      string             `json:"message_id"`
	ThreadID       string             `json:"thread_id"`
	InboxID        string             `json:"inbox_id"`
	From           string             `json:"from"`
	To             []string           `json:"to"`
	Cc             []string           `json:"cc"`
	Bcc            []string           `json:"bcc"`
	Subject        string             `json:"subject"`
	Text           string             `json:"text"`
	HTML           string             `json:"html"`
	Headers        map[string]string  `json:"headers"`
	InReplyTo      string             `json:"in_reply_to"`
	References     []string           `json:"references"`
	Attachments    []OutboxAttachment `json:"attachments"`
	IdempotencyKey string             `json:"idempotency_key"`
	SentAt         time.Time          `json:"sent_at"`
}

// OutboxAttachment is an attachment of an OutboxMessage.
type OutboxAttachment struct {
	Filename      string `json:"filename"`
	ContentType   string `json:"content_type"`
	Size          int    `json:"size"`
	ContentBase64 string `json:"content_base64"`
}

type outboxEntry struct {
	orgID string
	msg   OutboxMessage
}

// idempotency state: keys are scoped to the organization and expire 24 h
// after the send completes.
type idemKey struct{ orgID, key string }

type idemEntry struct {
	fingerprint string
	done        bool
	body        []byte
	completedAt time.Time
}

const idemRetention = 24 * time.Hour

var idemKeyPattern = regexp.MustCompile(`^[A-Za-z0-9._~-]{1,256}$`)

// withIdempotency runs a send under the Idempotency-Key protocol: replay a
// completed identical request, 409 for a different request or one still in
// flight, 400 for an empty or malformed key. The key only completes when
// the response is released (recorder commit), so a delayed response keeps
// it in flight; a failed send releases it for reuse.
func (c *call) withIdempotency(fn func() (*wireSendResponse, error)) (any, error) {
	if !c.hasIdem {
		return fn()
	}
	if c.idemKey == "" {
		return nil, errValidation("Idempotency-Key must not be empty")
	}
	if !idemKeyPattern.MatchString(c.idemKey) {
		return nil, errValidation("Idempotency-Key must be 1-256 characters of A-Z a-z 0-9 - . _ ~")
	}
	fp := c.fingerprint()
	k := idemKey{c.key.orgID, c.idemKey}
	st := &c.s.state
	c.s.mu.Lock()
	if e := st.idem[k]; e != nil {
		if e.done && st.now().Sub(e.completedAt) > idemRetention {
			delete(st.idem, k)
		} else {
			// Why copied under the lock: the first request's commit sets
			// done and body under it, possibly while this one answers.
			same, done, body := e.fingerprint == fp, e.done, e.body
			c.s.mu.Unlock()
			switch {
			case !same:
				return nil, errConflict("Idempotency-Key was already used with a different request")
			case !done:
				return nil, errConflict("A request with this Idempotency-Key is still in progress")
			}
			return json.RawMessage(body), nil
		}
	}
	entry := &idemEntry{fingerprint: fp}
	st.idem[k] = entry
	c.s.mu.Unlock()

	res, err := fn()
	if err != nil {
		c.s.mu.Lock()
		if st.idem[k] == entry {
			delete(st.idem, k)
		}
		c.s.mu.Unlock()
		return nil, err
	}
	body, _ := marshalJSON(res)
	c.rec.onCommit(func() {
		c.s.mu.Lock()
		entry.done = true
		entry.body = body
		entry.completedAt = st.now()
		c.s.mu.Unlock()
	})
	return res, nil
}

// fingerprint identifies "the same request": operation, path and the
// canonicalized JSON body (key order and whitespace do not matter).
func (c *call) fingerprint() string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00", c.r.Method, c.r.URL.Path)
	var v any
	if json.Unmarshal(c.body, &v) == nil {
		b, _ := json.Marshal(v)
		h.Write(b)
	} else {
		h.Write(c.body)
	}
	return hex.EncodeToString(h.Sum(nil))
}

var headerNamePattern = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")

func validateAddrs(field string, list []string) ([]string, error) {
	out := make([]string, 0, len(list))
	for _, a := range list {
		if strings.TrimSpace(a) == "" {
			continue
		}
		if _, err := mail.ParseAddress(a); err != nil {
			return nil, errValidation(fmt.Sprintf("%s: invalid email address %q", field, a))
		}
		out = append(out, strings.TrimSpace(a))
	}
	return out, nil
}

func validateCommon(sc *sendCommon) (labels []string, replyTo []string, err error) {
	for _, l := range normalizeLabels(sc.Labels) {
		if systemLabels[l] && l != "sent" {
			return nil, nil, errValidation("labels: system label " + l + " cannot be set")
		}
		if l != "sent" {
			labels = append(labels, l)
		}
	}
	if replyTo, err = validateAddrs("reply_to", sc.ReplyTo); err != nil {
		return nil, nil, err
	}
	for k, v := range sc.Headers {
		if !headerNamePattern.MatchString(k) || strings.ContainsAny(v, "\r\n") {
			return nil, nil, errValidation("headers: invalid header " + k)
		}
	}
	return labels, replyTo, nil
}

// loadAttachments decodes base64 content or fetches url attachments.
func loadAttachments(ctx context.Context, in []sendAttachment) ([]*attachment, error) {
	var out []*attachment
	for i, a := range in {
		var data []byte
		switch {
		case a.Content != "" && a.URL != "":
			return nil, errValidation(fmt.Sprintf("attachments[%d]: set either content or url", i))
		case a.Content != "":
			d, err := base64.StdEncoding.DecodeString(a.Content)
			if err != nil {
				return nil, errValidation(fmt.Sprintf("attachments[%d].content: invalid base64", i))
			}
			data = d
		case a.URL != "":
			d, err := fetchAttachment(ctx, a.URL)
			if err != nil {
				return nil, errMessageRejected(fmt.Sprintf("attachments[%d].url could not be fetched", i))
			}
			data = d
		default:
			return nil, errValidation(fmt.Sprintf("attachments[%d]: content or url is required", i))
		}
		disp := a.ContentDisposition
		if disp == "" {
			disp = "attachment"
		}
		if disp != "inline" && disp != "attachment" {
			return nil, errValidation(fmt.Sprintf("attachments[%d].content_disposition must be inline or attachment", i))
		}
		name := a.Filename
		if name == "" && a.URL != "" {
			name = path.Base(a.URL)
		}
		ct := a.ContentType
		if ct == "" {
			ct = mime.TypeByExtension(path.Ext(name))
		}
		if ct == "" {
			ct = http.DetectContentType(data)
		}
		out = append(out, &attachment{id: "att_" + randomAlnum(20), filename: name, contentType: ct, disposition: disp, contentID: a.ContentID, data: data})
	}
	return out, nil
}

func fetchAttachment(ctx context.Context, url string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("build attachment request: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetch attachment: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetch attachment: status %d", resp.StatusCode)
	}
	return io.ReadAll(io.LimitReader(resp.Body, maxPartBytes))
}

// outgoing is a validated send ready to be committed.
type outgoing struct {
	to, cc, bcc, replyTo []string
	subject, text, html  string
	labels               []string
	headers              map[string]string
	attachments          []*attachment
	inReplyTo            string
	references           []string
	thread               string
}

func (o *outgoing) recipients() []string {
	var all []string
	seen := map[string]bool{}
	for _, r := range append(append(append([]string{}, o.to...), o.cc...), o.bcc...) {
		a := addrOnly(r)
		if !seen[a] {
			seen[a] = true
			all = append(all, a)
		}
	}
	return all
}

func (c *call) handleSend() (any, error) {
	var req sendRequest
	if err := c.decode(&req, false); err != nil {
		return nil, err
	}
	return c.withIdempotency(func() (*wireSendResponse, error) {
		o, err := c.buildSend(req.sendCommon, req.To, req.Cc, req.Bcc)
		if err != nil {
			return nil, err
		}
		o.subject = req.Subject
		return c.commitSend(o)
	})
}

func (c *call) buildSend(sc sendCommon, to, cc, bcc addrList) (*outgoing, error) {
	labels, replyTo, err := validateCommon(&sc)
	if err != nil {
		return nil, err
	}
	o := &outgoing{labels: labels, replyTo: replyTo, text: sc.Text, html: sc.HTML, headers: sc.Headers}
	if o.to, err = validateAddrs("to", to); err != nil {
		return nil, err
	}
	if o.cc, err = validateAddrs("cc", cc); err != nil {
		return nil, err
	}
	if o.bcc, err = validateAddrs("bcc", bcc); err != nil {
		return nil, err
	}
	if o.attachments, err = loadAttachments(c.r.Context(), sc.Attachments); err != nil {
		return nil, err
	}
	return o, nil
}

// original resolves the message_id path parameter in the sending inbox.
func (c *call) originalLocked(ib *inbox) (*message, error) {
	m := c.s.state.messages[msgKey{ib.id, normalizeMsgID(c.p["message_id"])}]
	if m == nil || !messageVisible(c.key, m, nil) {
		return nil, errNotFound("Message")
	}
	return m, nil
}

type origSnapshot struct {
	messageID, threadID, from, subject, text, html string
	to, cc, replyTo, references                    []string
	sent                                           bool
	timestamp                                      time.Time
	attachments                                    []*attachment
}

func (c *call) snapshotOriginal() (*inbox, *origSnapshot, error) {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	ib, m, err := c.messageLocked()
	if err != nil {
		return nil, nil, err
	}
	return ib, &origSnapshot{
		messageID: m.messageID, threadID: m.threadID, from: m.from, subject: m.subject,
		text: m.text, html: m.html, to: copyStrings(m.to), cc: copyStrings(m.cc),
		replyTo: copyStrings(m.replyTo), references: copyStrings(m.references), sent: m.sent,
		timestamp: m.timestamp, attachments: m.attachments,
	}, nil
}

func prefixSubject(prefix, subject string) string {
	if strings.HasPrefix(strings.ToLower(subject), strings.ToLower(prefix)) {
		return subject
	}
	return prefix + " " + subject
}

// replyRecipients derives reply recipients: the original Reply-To, else its
// sender; for a message the inbox itself sent, the original recipients.
// Reply-all adds the original To and Cc minus the inbox itself.
func replyRecipients(self string, o *origSnapshot, all bool) (to, cc []string) {
	switch {
	case o.sent:
		to = copyStrings(o.to)
	case len(o.replyTo) > 0:
		to = copyStrings(o.replyTo)
	default:
		to = []string{o.from}
	}
	if all {
		seen := map[string]bool{strings.ToLower(self): true}
		for _, a := range to {
			seen[addrOnly(a)] = true
		}
		for _, a := range o.to {
			if !seen[addrOnly(a)] {
				seen[addrOnly(a)] = true
				to = append(to, a)
			}
		}
		for _, a := range o.cc {
			if !seen[addrOnly(a)] {
				seen[addrOnly(a)] = true
				cc = append(cc, a)
			}
		}
	}
	var keep []string
	for _, a := range to {
		if !strings.EqualFold(addrOnly(a), self) || o.sent {
			keep = append(keep, a)
		}
	}
	return keep, cc
}

func (c *call) handleReply() (any, error) {
	var req replyRequest
	if err := c.decode(&req, true); err != nil {
		return nil, err
	}
	return c.reply(req.sendCommon, req.To, req.Cc, req.Bcc, req.ReplyAll != nil && *req.ReplyAll)
}

func (c *call) handleReplyAll() (any, error) {
	var req replyAllRequest
	if err := c.decode(&req, true); err != nil {
		return nil, err
	}
	return c.reply(req.sendCommon, nil, nil, nil, true)
}

// reply answers the call's original message: to the explicit recipients
// when there are any, else to the ones derived from the original (its
// sender, and with all its other recipients too).
func (c *call) reply(sc sendCommon, to, cc, bcc addrList, all bool) (any, error) {
	return c.withIdempotency(func() (*wireSendResponse, error) {
		ib, orig, err := c.snapshotOriginal()
		if err != nil {
			return nil, err
		}
		o, err := c.buildSend(sc, to, cc, bcc)
		if err != nil {
			return nil, err
		}
		if len(o.to)+len(o.cc)+len(o.bcc) == 0 {
			o.to, o.cc = replyRecipients(ib.id, orig, all)
		}
		c.threadReply(o, orig)
		return c.commitSend(o)
	})
}

func (c *call) threadReply(o *outgoing, orig *origSnapshot) {
	o.subject = prefixSubject("Re:", orig.subject)
	o.inReplyTo = orig.messageID
	o.references = append(copyStrings(orig.references), orig.messageID)
	o.thread = orig.threadID
}

func (c *call) handleForward() (any, error) {
	var req sendRequest
	if err := c.decode(&req, false); err != nil {
		return nil, err
	}
	return c.withIdempotency(func() (*wireSendResponse, error) {
		_, orig, err := c.snapshotOriginal()
		if err != nil {
			return nil, err
		}
		o, err := c.buildSend(req.sendCommon, req.To, req.Cc, req.Bcc)
		if err != nil {
			return nil, err
		}
		o.subject = req.Subject
		if o.subject == "" {
			o.subject = prefixSubject("Fwd:", orig.subject)
		}
		banner := fmt.Sprintf("---------- Forwarded message ---------\nFrom: %s\nDate: %s\nSubject: %s\nTo: %s\n\n",
			orig.from, orig.timestamp.Format(time.RFC1123Z), orig.subject, strings.Join(orig.to, ", "))
		if orig.text != "" || o.text != "" {
			o.text = strings.TrimRight(o.text, "\n") + "\n\n" + banner + orig.text
		}
		if orig.html != "" {
			o.html += `<div class="gmail_quote">` + strings.ReplaceAll(banner, "\n", "<br>") + orig.html + `</div>`
		}
		for _, a := range orig.attachments {
			cp := *a
			cp.id = "att_" + randomAlnum(20)
			o.attachments = append(o.attachments, &cp)
		}
		o.thread = orig.threadID
		return c.commitSend(o)
	})
}

// commitSend stores the sent message, delivers copies to hosted recipient
// inboxes, records external mail in the outbox, emits message.sent and
// schedules the delivery receipts.
func (c *call) commitSend(o *outgoing) (*wireSendResponse, error) {
	recipients := o.recipients()
	if len(recipients) == 0 {
		return nil, errUnprocessable("Message must have at least one recipient (to, cc or bcc)")
	}
	if len(recipients) > 50 {
		return nil, errValidation("A message can have at most 50 recipients")
	}
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	ib, err := c.inboxLocked(c.p["inbox_id"])
	if err != nil {
		return nil, err
	}
	// The send lists: a recipient on a send block list, or missing from an
	// active send allow list, refuses the whole send.
	for _, r := range recipients {
		if s.listVerdictLocked(ib, r, "send") {
			return nil, errMessageRejected("Recipient " + addrOnly(r) + " is blocked by a send list")
		}
	}
	now := s.state.now()
	from := ib.id
	if ib.displayName != "" {
		from = formatNameAddr(ib.displayName, ib.id)
	}
	m := &message{
		inboxID: ib.id, messageID: "<" + randomAlnum(24) + "@" + domainPart(ib.id) + ">",
		labels: append([]string{"sent"}, o.labels...), timestamp: now, createdAt: now, updatedAt: now,
		from: from, to: o.to, cc: o.cc, bcc: o.bcc, replyTo: o.replyTo,
		subject: o.subject, text: o.text, html: o.html, attachments: o.attachments,
		inReplyTo: o.inReplyTo, references: o.references, sent: true,
	}
	m.headers = map[string]string{"From": from, "Subject": o.subject, "Message-ID": m.messageID, "Date": now.Format(time.RFC1123Z)}
	if len(o.to) > 0 {
		m.headers["To"] = strings.Join(o.to, ", ")
	}
	if len(o.cc) > 0 {
		m.headers["Cc"] = strings.Join(o.cc, ", ")
	}
	if o.inReplyTo != "" {
		m.headers["In-Reply-To"] = o.inReplyTo
		m.headers["References"] = strings.Join(o.references, " ")
	}
	for k, v := range o.headers {
		m.headers[k] = v
	}
	if m.text != "" {
		m.preview = makePreview(m.text)
		m.extractedText = extractReplyText(m.text)
	}
	if m.html != "" {
		m.extractedHTML = extractReplyHTML(m.html)
	}
	m.size = estimateSize(m)
	s.state.storeMessageLocked(m, o.thread)
	s.publishLocked(s.receiptEventLocked(ib, m, evSent, recipients, now))

	var external []string
	for _, r := range recipients {
		target := s.state.lookupInbox(r)
		if target == nil {
			external = append(external, r)
			continue
		}
		if target == ib {
			continue // the sender's copy already lives in this inbox
		}
		in := &inboundMail{
			from: from, to: copyStrings(o.to), cc: copyStrings(o.cc), replyTo: copyStrings(o.replyTo),
			subject: o.subject, text: o.text, html: o.html, headers: copyHeaders(m.headers),
			messageID: m.messageID, inReplyTo: o.inReplyTo, references: copyStrings(o.references), date: now,
		}
		for _, a := range o.attachments {
			cp := *a
			cp.id = "att_" + randomAlnum(20)
			in.attachments = append(in.attachments, &cp)
		}
		s.receiveLocked(target, in)
	}
	if len(external) > 0 {
		s.state.outbox = appendBounded(s.state.outbox, &outboxEntry{orgID: ib.orgID, msg: outboxView(m, c.idemKey)})
	}
	s.scheduleReceiptsLocked(ib.id, m.messageID, recipients)
	return &wireSendResponse{MessageID: m.messageID, ThreadID: m.threadID}, nil
}

func copyHeaders(h map[string]string) map[string]string {
	out := make(map[string]string, len(h))
	for k, v := range h {
		out[k] = v
	}
	return out
}

func outboxView(m *message, idemKey string) OutboxMessage {
	o := OutboxMessage{
		MessageID: m.messageID, ThreadID: m.threadID, InboxID: m.inboxID, From: m.from,
		To: nonNil(m.to), Cc: nonNil(m.cc), Bcc: nonNil(m.bcc), Subject: m.subject, Text: m.text, HTML: m.html,
		Headers: copyHeaders(m.headers), InReplyTo: m.inReplyTo, References: nonNil(m.references),
		Attachments: []OutboxAttachment{}, IdempotencyKey: idemKey, SentAt: m.createdAt,
	}
	for _, a := range m.attachments {
		o.Attachments = append(o.Attachments, OutboxAttachment{
			Filename: a.filename, ContentType: a.contentType, Size: len(a.data),
			ContentBase64: base64.StdEncoding.EncodeToString(a.data),
		})
	}
	return o
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return append([]string{}, s...)
}

// receiptKind maps a recipient's local part to its delivery outcome.
func receiptKind(addr string) string {
	switch localPart(addr) {
	case "bounce":
		return evBounced
	case "complain":
		return evComplained
	case "reject":
		return evRejected
	}
	return evDelivered
}

// scheduleReceiptsLocked emits the delivery receipts of a send after the
// configured delivery delay.
func (s *Server) scheduleReceiptsLocked(inboxID, messageID string, recipients []string) {
	delay := s.state.deliveryDelay
	groups := map[string][]string{}
	var order []string
	for _, r := range recipients {
		k := receiptKind(r)
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], r)
	}
	s.goBackground(func(ctx context.Context) {
		if !sleepCtx(ctx, delay) {
			return
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, typ := range order {
			s.emitReceiptLocked(inboxID, messageID, typ, groups[typ])
		}
	})
}

// receiptLabel is the system label a receipt adds to the sent message.
var receiptLabel = map[string]string{
	evDelivered: "delivered", evBounced: "bounced", evComplained: "complained",
	evRejected: "rejected", evDelayed: "delayed",
}

// emitReceiptLocked labels the sent message and publishes the receipt. It
// is a no-op when the message has been deleted meanwhile.
func (s *Server) emitReceiptLocked(inboxID, messageID, typ string, recipients []string) bool {
	m := s.state.messages[msgKey{inboxID, messageID}]
	ib := s.state.lookupInbox(inboxID)
	if m == nil || ib == nil {
		return false
	}
	now := s.state.now()
	m.labels = addLabel(m.labels, receiptLabel[typ])
	m.updatedAt = now
	s.publishLocked(s.receiptEventLocked(ib, m, typ, recipients, now))
	return true
}
