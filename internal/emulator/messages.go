package emulator

import (
	"net/mail"
	"strings"
	"time"
	"unicode"
)

// systemLabels cannot be added or removed through the API.
var systemLabels = map[string]bool{
	"received": true, "sent": true, "delivered": true, "bounced": true,
	"complained": true, "rejected": true, "delayed": true, "opened": true,
}

func normalizeLabels(in []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, l := range in {
		l = strings.ToLower(strings.TrimSpace(l))
		if l == "" || seen[l] {
			continue
		}
		seen[l] = true
		out = append(out, l)
	}
	return out
}

func addLabel(labels []string, l string) []string {
	for _, x := range labels {
		if x == l {
			return labels
		}
	}
	return append(labels, l)
}

func removeLabel(labels []string, l string) []string {
	out := labels[:0:0]
	for _, x := range labels {
		if x != l {
			out = append(out, x)
		}
	}
	return out
}

// makePreview returns the first ~200 characters of text, whitespace folded.
func makePreview(text string) string {
	f := strings.Join(strings.FieldsFunc(text, unicode.IsSpace), " ")
	r := []rune(f)
	if len(r) > 200 {
		r = r[:200]
	}
	return string(r)
}

// addrOnly extracts the bare lower-case address from "Name <a@b>" or "a@b".
func addrOnly(s string) string {
	if a, err := mail.ParseAddress(s); err == nil {
		return strings.ToLower(a.Address)
	}
	s = strings.TrimSpace(s)
	if i := strings.LastIndex(s, "<"); i >= 0 {
		if j := strings.Index(s[i:], ">"); j > 0 {
			return strings.ToLower(strings.TrimSpace(s[i+1 : i+j]))
		}
	}
	return strings.ToLower(s)
}

func localPart(addr string) string {
	a := addrOnly(addr)
	if i := strings.LastIndex(a, "@"); i >= 0 {
		return a[:i]
	}
	return a
}

func domainPart(addr string) string {
	a := addrOnly(addr)
	if i := strings.LastIndex(a, "@"); i >= 0 {
		return a[i+1:]
	}
	return ""
}

// messageVisible reports whether k may see m. Messages carrying a hidden
// label need both the matching include flag (lists) and permission.
func messageVisible(k *apiKey, m *message, include map[string]bool) bool {
	for _, l := range m.labels {
		if perm, hidden := hiddenLabelPermission[l]; hidden {
			if !keyHas(k, perm) {
				return false
			}
			if include != nil && !include[l] {
				return false
			}
		}
	}
	return true
}

func attachmentsWire(atts []*attachment) []wireAttachment {
	if len(atts) == 0 {
		return nil
	}
	out := make([]wireAttachment, 0, len(atts))
	for _, a := range atts {
		out = append(out, wireAttachment{
			AttachmentID: a.id, Filename: a.filename, Size: len(a.data),
			ContentType: a.contentType, ContentDisposition: a.disposition, ContentID: a.contentID,
		})
	}
	return out
}

func copyStrings(in []string) []string {
	if len(in) == 0 {
		return nil
	}
	return append([]string(nil), in...)
}

// messageWire renders a MessageItem (full=false) or a Message (full=true).
func messageWire(m *message, full bool) wireMessage {
	w := wireMessage{
		InboxID: m.inboxID, ThreadID: m.threadID, MessageID: m.messageID,
		Labels: append([]string{}, m.labels...), Timestamp: ts(m.timestamp),
		From: m.from, To: append([]string{}, m.to...), Cc: copyStrings(m.cc), Bcc: copyStrings(m.bcc),
		Subject: m.subject, Preview: m.preview, Attachments: attachmentsWire(m.attachments),
		InReplyTo: m.inReplyTo, References: copyStrings(m.references),
		Size: m.size, UpdatedAt: ts(m.updatedAt), CreatedAt: ts(m.createdAt),
	}
	if len(m.headers) > 0 {
		w.Headers = make(map[string]string, len(m.headers))
		for k, v := range m.headers {
			w.Headers[k] = v
		}
	}
	if full {
		w.ReplyTo = copyStrings(m.replyTo)
		w.Text, w.HTML = m.text, m.html
		w.ExtractedText, w.ExtractedHTML = m.extractedText, m.extractedHTML
	}
	return w
}

// threadSortTime is the thread's timestamp: its latest visible message.
func threadItemWire(t *thread, msgs []*message) wireThreadItem {
	w := wireThreadItem{InboxID: t.inboxID, ThreadID: t.id, Labels: []string{}, Senders: []string{}, Recipients: []string{}}
	var latest, latestRecv, latestSent *message
	seenS, seenR := map[string]bool{}, map[string]bool{}
	var created, updated time.Time
	for _, m := range msgs {
		for _, l := range m.labels {
			w.Labels = addLabel(w.Labels, l)
		}
		if a := addrOnly(m.from); !seenS[a] {
			seenS[a] = true
			w.Senders = append(w.Senders, m.from)
		}
		for _, r := range append(append([]string{}, m.to...), m.cc...) {
			if a := addrOnly(r); !seenR[a] {
				seenR[a] = true
				w.Recipients = append(w.Recipients, r)
			}
		}
		w.Attachments = append(w.Attachments, attachmentsWire(m.attachments)...)
		w.Size += m.size
		if latest == nil || !(sortKey{m.timestamp, m.seq}).less(sortKey{latest.timestamp, latest.seq}) {
			latest = m
		}
		if m.sent {
			if latestSent == nil || latestSent.timestamp.Before(m.timestamp) {
				latestSent = m
			}
		} else if latestRecv == nil || latestRecv.timestamp.Before(m.timestamp) {
			latestRecv = m
		}
		if created.IsZero() || m.createdAt.Before(created) {
			created = m.createdAt
		}
		if m.updatedAt.After(updated) {
			updated = m.updatedAt
		}
	}
	w.MessageCount = len(msgs)
	if len(msgs) > 0 {
		w.Subject = msgs[0].subject
	}
	if latest != nil {
		w.Timestamp = ts(latest.timestamp)
		w.Preview = latest.preview
		w.LastMessageID = latest.messageID
		if w.Subject == "" {
			w.Subject = latest.subject
		}
	}
	if latestRecv != nil {
		w.ReceivedTimestamp = tsPtr(latestRecv.timestamp)
	}
	if latestSent != nil {
		w.SentTimestamp = tsPtr(latestSent.timestamp)
	}
	w.CreatedAt, w.UpdatedAt = ts(created), ts(updated)
	return w
}

// threadKey is the sort key of a thread: its latest message.
func threadKey(msgs []*message) sortKey {
	var k sortKey
	for _, m := range msgs {
		mk := sortKey{m.timestamp, m.seq}
		if k.less(mk) {
			k = mk
		}
	}
	return k
}

// findThreadLocked returns the thread of the first message of the inbox
// named by In-Reply-To or References (newest reference first), or nil.
func (st *state) findThreadLocked(inboxID, inReplyTo string, refs []string) *thread {
	cands := []string{}
	if inReplyTo != "" {
		cands = append(cands, inReplyTo)
	}
	for i := len(refs) - 1; i >= 0; i-- {
		cands = append(cands, refs[i])
	}
	for _, id := range cands {
		if m := st.messages[msgKey{inboxID, normalizeMsgID(id)}]; m != nil {
			return st.threads[m.threadID]
		}
	}
	return nil
}

// normalizeMsgID puts angle brackets around a Message-ID.
func normalizeMsgID(id string) string {
	id = strings.TrimSpace(id)
	if id == "" {
		return ""
	}
	if !strings.HasPrefix(id, "<") {
		id = "<" + id
	}
	if !strings.HasSuffix(id, ">") {
		id += ">"
	}
	return id
}

// storeMessageLocked threads m into its inbox (joining the thread named by
// its In-Reply-To/References, else starting a new one) and indexes it.
func (st *state) storeMessageLocked(m *message, forceThread string) *thread {
	var th *thread
	if forceThread != "" {
		th = st.threads[forceThread]
	}
	if th == nil {
		th = st.findThreadLocked(m.inboxID, m.inReplyTo, m.references)
	}
	if th == nil {
		th = &thread{id: "thd_" + randomAlnum(20), inboxID: m.inboxID, seq: st.nextSeq(), createdAt: m.createdAt}
		st.threads[th.id] = th
	}
	m.threadID = th.id
	m.seq = st.nextSeq()
	th.messages = append(th.messages, m)
	st.messages[msgKey{m.inboxID, m.messageID}] = m
	st.inboxMsgs[m.inboxID] = append(st.inboxMsgs[m.inboxID], m)
	return th
}

// deleteMessageLocked removes m from every index.
func (st *state) deleteMessageLocked(m *message) {
	delete(st.messages, msgKey{m.inboxID, m.messageID})
	list := st.inboxMsgs[m.inboxID]
	for i, x := range list {
		if x == m {
			st.inboxMsgs[m.inboxID] = append(list[:i:i], list[i+1:]...)
			break
		}
	}
	if th := st.threads[m.threadID]; th != nil {
		for i, x := range th.messages {
			if x == m {
				th.messages = append(th.messages[:i:i], th.messages[i+1:]...)
				break
			}
		}
		if len(th.messages) == 0 {
			delete(st.threads, th.id)
		}
	}
}
