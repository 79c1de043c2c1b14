package emulator

import (
	"bytes"
	"mime"
	"net/http"
	"strings"
	"time"
	"unicode"
)

// includeFlags reads include_spam & co; the matching permission is checked
// per message by messageVisible.
func (c *call) includeFlags() (map[string]bool, error) {
	inc := map[string]bool{}
	for label := range hiddenLabelPermission {
		v, err := c.boolParam("include_" + label)
		if err != nil {
			return nil, err
		}
		inc[label] = v
	}
	return inc, nil
}

func hasAllLabels(have, want []string) bool {
	for _, w := range want {
		found := false
		for _, h := range have {
			if h == strings.ToLower(w) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

func containsFold(hay, needle string) bool {
	return strings.Contains(strings.ToLower(hay), strings.ToLower(needle))
}

func inTimeRange(t time.Time, lp listParams) bool {
	if lp.before != nil && !t.Before(*lp.before) {
		return false
	}
	if lp.after != nil && !t.After(*lp.after) {
		return false
	}
	return true
}

func (c *call) listMessages() (any, error) {
	lp, err := c.listParams()
	if err != nil {
		return nil, err
	}
	inc, err := c.includeFlags()
	if err != nil {
		return nil, err
	}
	labels := c.listParam("labels")
	froms, tos, subjects := c.listParam("from"), c.listParam("to"), c.listParam("subject")

	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	ib, err := c.inboxLocked(c.p["inbox_id"])
	if err != nil {
		return nil, err
	}
	var all []*message
	for _, m := range c.s.state.inboxMsgs[ib.id] {
		if !messageVisible(c.key, m, inc) || !hasAllLabels(m.labels, labels) || !inTimeRange(m.timestamp, lp) {
			continue
		}
		if !matchAll(froms, m.from) || !matchAll(tos, strings.Join(append(append(append([]string{}, m.to...), m.cc...), m.bcc...), ",")) || !matchAll(subjects, m.subject) {
			continue
		}
		all = append(all, m)
	}
	return messagePage(all, "messages:"+ib.id, lp)
}

func msgSortKey(m *message) sortKey { return sortKey{m.timestamp, m.seq} }

func matchAll(needles []string, hay string) bool {
	for _, n := range needles {
		if !containsFold(hay, n) {
			return false
		}
	}
	return true
}

func messageMatchesQuery(m *message, q string) bool {
	hay := m.from + " " + strings.Join(m.to, " ") + " " + strings.Join(m.cc, " ") + " " + m.subject + " " + m.text
	return containsFold(hay, q)
}

// searchParams reads a search's q (required, checked first) and its list
// parameters, newest first.
func (c *call) searchParams() (string, listParams, error) {
	q := strings.TrimSpace(c.q.Get("q"))
	if q == "" {
		return "", listParams{}, errValidation("q is required")
	}
	lp, err := c.listParams()
	if err != nil {
		return "", listParams{}, err
	}
	lp.asc = false
	return q, lp, nil
}

func (c *call) searchMessages() (any, error) {
	q, lp, err := c.searchParams()
	if err != nil {
		return nil, err
	}
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	ib, err := c.inboxLocked(c.p["inbox_id"])
	if err != nil {
		return nil, err
	}
	none := map[string]bool{}
	var all []*message
	for _, m := range c.s.state.inboxMsgs[ib.id] {
		if messageVisible(c.key, m, none) && inTimeRange(m.timestamp, lp) && messageMatchesQuery(m, q) {
			all = append(all, m)
		}
	}
	return messagePage(all, "message-search:"+ib.id+":"+q, lp)
}

// messageLocked resolves inbox_id + message_id within scope and visibility.
func (c *call) messageLocked() (*inbox, *message, error) {
	ib, err := c.inboxLocked(c.p["inbox_id"])
	if err != nil {
		return nil, nil, err
	}
	m, err := c.originalLocked(ib)
	if err != nil {
		return nil, nil, err
	}
	return ib, m, nil
}

func (c *call) getMessage() (any, error) {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	_, m, err := c.messageLocked()
	if err != nil {
		return nil, err
	}
	return messageWire(m, true), nil
}

// labelList accepts a label string or an array of labels.
type labelList = addrList

// applyLabelChange validates and applies add/remove label lists.
func applyLabelChange(m *message, add, remove []string, now time.Time) {
	for _, l := range normalizeLabels(add) {
		m.labels = addLabel(m.labels, l)
	}
	for _, l := range normalizeLabels(remove) {
		m.labels = removeLabel(m.labels, l)
	}
	m.updatedAt = now
}

func checkUserLabels(lists ...[]string) error {
	for _, list := range lists {
		for _, l := range normalizeLabels(list) {
			if systemLabels[l] {
				return errValidation("System label " + l + " cannot be added or removed")
			}
		}
	}
	return nil
}

func (c *call) updateMessage() (any, error) {
	var req struct {
		AddLabels    labelList `json:"add_labels"`
		RemoveLabels labelList `json:"remove_labels"`
	}
	if err := c.decode(&req, false); err != nil {
		return nil, err
	}
	if err := checkUserLabels(req.AddLabels, req.RemoveLabels); err != nil {
		return nil, err
	}
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	_, m, err := c.messageLocked()
	if err != nil {
		return nil, err
	}
	applyLabelChange(m, req.AddLabels, req.RemoveLabels, c.s.state.now())
	return map[string]any{"message_id": m.messageID, "labels": append([]string{}, m.labels...)}, nil
}

func (c *call) deleteMessage() (any, error) {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	_, m, err := c.messageLocked()
	if err != nil {
		return nil, err
	}
	c.s.state.deleteMessageLocked(m)
	return noContent{}, nil
}

func (c *call) batchGetMessages() (any, error) {
	var req struct {
		MessageIDs []string `json:"message_ids"`
	}
	if err := c.decode(&req, false); err != nil {
		return nil, err
	}
	if len(req.MessageIDs) == 0 || len(req.MessageIDs) > 500 {
		return nil, errValidation("message_ids must hold 1 to 500 ids")
	}
	seen := map[string]bool{}
	for _, id := range req.MessageIDs {
		if seen[id] {
			return nil, errValidation("message_ids must not contain duplicates")
		}
		seen[id] = true
	}
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	ib, err := c.inboxLocked(c.p["inbox_id"])
	if err != nil {
		return nil, err
	}
	out := []wireMessage{}
	for _, id := range req.MessageIDs {
		m := c.s.state.messages[msgKey{ib.id, normalizeMsgID(id)}]
		if m == nil || !messageVisible(c.key, m, nil) {
			continue
		}
		w := messageWire(m, true)
		w.Text, w.HTML, w.ExtractedText, w.ExtractedHTML = "", "", "", ""
		out = append(out, w)
	}
	return map[string]any{"limit": len(req.MessageIDs), "count": len(out), "messages": out}, nil
}

func (c *call) batchUpdateMessages() (any, error) {
	var req struct {
		MessageIDs   []string  `json:"message_ids"`
		AddLabels    labelList `json:"add_labels"`
		RemoveLabels labelList `json:"remove_labels"`
	}
	if err := c.decode(&req, false); err != nil {
		return nil, err
	}
	if len(req.MessageIDs) == 0 || len(req.MessageIDs) > 50 {
		return nil, errValidation("message_ids must hold 1 to 50 ids")
	}
	if len(req.AddLabels) == 0 && len(req.RemoveLabels) == 0 {
		return nil, errValidation("Provide add_labels or remove_labels")
	}
	if err := checkUserLabels(req.AddLabels, req.RemoveLabels); err != nil {
		return nil, err
	}
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	ib, err := c.inboxLocked(c.p["inbox_id"])
	if err != nil {
		return nil, err
	}
	now := c.s.state.now()
	updates := []map[string]any{}
	for _, id := range req.MessageIDs {
		m := c.s.state.messages[msgKey{ib.id, normalizeMsgID(id)}]
		if m == nil || !messageVisible(c.key, m, nil) {
			continue
		}
		applyLabelChange(m, req.AddLabels, req.RemoveLabels, now)
		updates = append(updates, map[string]any{"message_id": m.messageID, "labels": append([]string{}, m.labels...)})
	}
	return map[string]any{"limit": len(req.MessageIDs), "count": len(updates), "updates": updates}, nil
}

// fileTTL is how long download URLs stay valid.
const fileTTL = time.Hour

func (c *call) fileURLLocked(ref *fileRef) (string, time.Time) {
	tok := randomToken(20)
	ref.expiresAt = c.s.state.now().Add(fileTTL)
	c.s.state.files[tok] = ref
	// Expired tokens are swept on each registration to bound memory.
	now := c.s.state.now()
	for k, f := range c.s.state.files {
		if now.After(f.expiresAt) {
			delete(c.s.state.files, k)
		}
	}
	return c.s.baseURL + "/_files/" + tok, ref.expiresAt
}

func (c *call) attachmentResponseLocked(a *attachment) wireAttachmentResponse {
	u, exp := c.fileURLLocked(&fileRef{att: a, name: a.filename})
	return wireAttachmentResponse{
		wireAttachment: attachmentsWire([]*attachment{a})[0],
		DownloadURL:    u, ExpiresAt: ts(exp),
	}
}

func (c *call) getMessageAttachment() (any, error) {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	_, m, err := c.messageLocked()
	if err != nil {
		return nil, err
	}
	for _, a := range m.attachments {
		if a.id == c.p["attachment_id"] {
			return c.attachmentResponseLocked(a), nil
		}
	}
	return nil, errNotFound("Attachment")
}

func (c *call) getRawMessage() (any, error) {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	_, m, err := c.messageLocked()
	if err != nil {
		return nil, err
	}
	raw := m.raw
	if raw == nil {
		raw = composeRaw(m)
	}
	u, exp := c.fileURLLocked(&fileRef{raw: raw, name: "message.eml"})
	return map[string]any{"message_id": m.messageID, "size": len(raw), "download_url": u, "expires_at": ts(exp)}, nil
}

// serveFile serves an attachment or raw message behind an expiring,
// unauthenticated download URL (like a presigned S3 URL).
func (s *Server) serveFile(w http.ResponseWriter, r *http.Request) {
	tok := strings.TrimPrefix(r.URL.Path, "/_files/")
	s.mu.Lock()
	ref := s.state.files[tok]
	expired := ref != nil && s.state.now().After(ref.expiresAt)
	s.mu.Unlock()
	if ref == nil || expired {
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code><Message>Request has expired</Message></Error>`))
		return
	}
	data, ct := ref.raw, "message/rfc822"
	if ref.att != nil {
		data, ct = ref.att.data, ref.att.contentType
		if ct == "" {
			ct = "application/octet-stream"
		}
	}
	// Like object storage, the response carries only well-formed header
	// values: a stored type or name with control characters (a hostile
	// sender's) is encoded or replaced, never written raw, which no HTTP
	// client would accept.
	if _, _, err := mime.ParseMediaType(ct); err != nil || strings.ContainsFunc(ct, unicode.IsControl) {
		ct = "application/octet-stream"
	}
	w.Header().Set("Content-Type", ct)
	if ref.name != "" {
		if cd := mime.FormatMediaType("attachment", map[string]string{"filename": ref.name}); cd != "" {
			w.Header().Set("Content-Disposition", cd)
		} else {
			w.Header().Set("Content-Disposition", "attachment")
		}
	}
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(data))
}

// Threads.

// threadScopeLocked returns the inboxes whose threads the route covers.
func (c *call) threadInboxesLocked() ([]*inbox, error) {
	if id, ok := c.p["inbox_id"]; ok {
		ib, err := c.inboxLocked(id)
		if err != nil {
			return nil, err
		}
		return []*inbox{ib}, nil
	}
	return c.visibleInboxesLocked()
}

type threadView struct {
	th   *thread
	msgs []*message
	key  sortKey
}

func (c *call) listThreads() (any, error) {
	return c.threadList(false)
}

func (c *call) searchThreads() (any, error) {
	return c.threadList(true)
}

func (c *call) threadList(search bool) (any, error) {
	lp, err := c.listParams()
	if err != nil {
		return nil, err
	}
	inc := map[string]bool{}
	var q string
	if search {
		if q = strings.TrimSpace(c.q.Get("q")); q == "" {
			return nil, errValidation("q is required")
		}
		lp.asc = false
	} else if inc, err = c.includeFlags(); err != nil {
		return nil, err
	}
	labels := c.listParam("labels")
	senders, recipients, subjects := c.listParam("senders"), c.listParam("recipients"), c.listParam("subject")

	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	inboxes, err := c.threadInboxesLocked()
	if err != nil {
		return nil, err
	}
	in := map[string]bool{}
	for _, ib := range inboxes {
		in[ib.id] = true
	}
	var views []threadView
	for _, th := range c.s.state.threads {
		if !in[th.inboxID] {
			continue
		}
		var msgs []*message
		matched := !search
		for _, m := range th.messages {
			if messageVisible(c.key, m, inc) {
				msgs = append(msgs, m)
				if search && messageMatchesQuery(m, q) {
					matched = true
				}
			}
		}
		if len(msgs) == 0 || !matched {
			continue
		}
		v := threadView{th: th, msgs: msgs, key: threadKey(msgs)}
		if !inTimeRange(v.key.t, lp) {
			continue
		}
		item := threadItemWire(th, msgs)
		if !hasAllLabels(item.Labels, labels) || !matchAll(senders, strings.Join(item.Senders, ",")) ||
			!matchAll(recipients, strings.Join(item.Recipients, ",")) || !matchAll(subjects, item.Subject) {
			continue
		}
		views = append(views, v)
	}
	kind := "threads"
	if search {
		kind = "thread-search:" + q
	}
	if id, ok := c.p["inbox_id"]; ok {
		kind += ":" + id
	}
	return listPage("threads", views, func(v threadView) sortKey { return v.key }, kind, lp, func(v threadView) wireThreadItem { return threadItemWire(v.th, v.msgs) })
}

// threadLocked resolves thread_id within the route's inbox/pod and scope,
// returning the messages the key may read.
func (c *call) threadLocked() (*thread, []*message, error) {
	th := c.s.state.threads[c.p["thread_id"]]
	if th == nil {
		return nil, nil, errNotFound("Thread")
	}
	ib := c.s.state.lookupInbox(th.inboxID)
	if ib == nil || !inboxInScope(c.key, ib) {
		return nil, nil, errNotFound("Thread")
	}
	if id, ok := c.p["inbox_id"]; ok && !strings.EqualFold(id, ib.id) {
		return nil, nil, errNotFound("Thread")
	}
	if _, ok := c.p["pod_id"]; ok {
		p, err := c.podLocked()
		if err != nil {
			return nil, nil, err
		}
		if ib.podID != p.id {
			return nil, nil, errNotFound("Thread")
		}
	}
	var msgs []*message
	for _, m := range th.messages {
		if messageVisible(c.key, m, nil) {
			msgs = append(msgs, m)
		}
	}
	if len(msgs) == 0 {
		return nil, nil, errNotFound("Thread")
	}
	return th, msgs, nil
}

func (c *call) getThread() (any, error) {
	lp, err := c.listParams()
	if err != nil {
		return nil, err
	}
	lp.asc = true // thread messages are ordered oldest first
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	th, msgs, err := c.threadLocked()
	if err != nil {
		return nil, err
	}
	item := threadItemWire(th, msgs)
	page, next, err := paginate(append([]*message(nil), msgs...), msgSortKey, "thread:"+th.id, lp)
	if err != nil {
		return nil, err
	}
	out := make([]wireMessage, 0, len(page))
	for _, m := range page {
		out = append(out, messageWire(m, true))
	}
	return wireThread{wireThreadItem: item, Count: len(out), Limit: lp.limit, NextPageToken: next, Messages: out}, nil
}

func (c *call) updateThread() (any, error) {
	var req struct {
		AddLabels    []string `json:"add_labels"`
		RemoveLabels []string `json:"remove_labels"`
	}
	if err := c.decode(&req, false); err != nil {
		return nil, err
	}
	if err := checkUserLabels(req.AddLabels, req.RemoveLabels); err != nil {
		return nil, err
	}
	// remove_labels wins over add_labels on duplicates.
	removed := map[string]bool{}
	for _, l := range normalizeLabels(req.RemoveLabels) {
		removed[l] = true
	}
	var add []string
	for _, l := range normalizeLabels(req.AddLabels) {
		if !removed[l] {
			add = append(add, l)
		}
	}
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	th, msgs, err := c.threadLocked()
	if err != nil {
		return nil, err
	}
	if len(th.messages) >= 100 {
		return nil, errUnprocessable("Threads with 100 or more messages cannot be updated")
	}
	now := c.s.state.now()
	for _, m := range msgs {
		applyLabelChange(m, add, req.RemoveLabels, now)
	}
	return map[string]any{"thread_id": th.id, "labels": threadItemWire(th, msgs).Labels}, nil
}

func (c *call) deleteThread() (any, error) {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	th, _, err := c.threadLocked()
	if err != nil {
		return nil, err
	}
	for _, m := range append([]*message(nil), th.messages...) {
		c.s.state.deleteMessageLocked(m)
	}
	delete(c.s.state.threads, th.id)
	return noContent{}, nil
}

func (c *call) getThreadAttachment() (any, error) {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	_, msgs, err := c.threadLocked()
	if err != nil {
		return nil, err
	}
	for _, m := range msgs {
		for _, a := range m.attachments {
			if a.id == c.p["attachment_id"] {
				return c.attachmentResponseLocked(a), nil
			}
		}
	}
	return nil, errNotFound("Attachment")
}

// messagePage sorts and pages messages (newest first unless ascending) and
// renders one list response; cursor names the listing the page token
// belongs to.
func messagePage(all []*message, cursor string, lp listParams) (any, error) {
	return listPage("messages", all, msgSortKey, cursor, lp, func(m *message) wireMessage { return messageWire(m, false) })
}
