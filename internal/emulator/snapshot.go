package emulator

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"
)

// snapshotVersion is the format version of a state file.
const snapshotVersion = 1

// The snapshot types mirror the provider state with exported fields, so a
// state file is plain JSON. Test-control state (faults, recorded requests,
// webhook attempts, download links, the clock offset) is not kept: it
// belongs to one test, not to the mailboxes.
type snapshot struct {
	Version  int             `json:"version"`
	Seq      uint64          `json:"seq"`
	Orgs     []snapOrg       `json:"organizations"`
	Pods     []snapPod       `json:"pods"`
	Inboxes  []snapInbox     `json:"inboxes"`
	Keys     []snapKey       `json:"apiKeys"`
	Messages []snapMessage   `json:"messages"` // per inbox, in arrival order
	Threads  []snapThread    `json:"threads"`
	Webhooks []snapWebhook   `json:"webhooks"`
	Domains  []snapDomain    `json:"domains"`
	Outbox   []snapOutbox    `json:"outbox"`
	Idem     []snapIdemEntry `json:"idempotency"`
	Lists    []snapListEntry `json:"lists,omitempty"`
}

type snapOrg struct {
	ID, Name, PodID      string
	CreatedAt, UpdatedAt time.Time
}

type snapPod struct {
	ID, OrgID, Name, ClientID string
	Seq                       uint64
	CreatedAt, UpdatedAt      time.Time
}

type snapInbox struct {
	ID, OrgID, PodID, DisplayName, ClientID string
	Metadata                                map[string]any
	Seq                                     uint64
	CreatedAt, UpdatedAt                    time.Time
	// BlockList is the receive block list of state files written before
	// the lists API; it is read as inbox-scoped receive/block entries.
	BlockList []string `json:",omitempty"`
}

type snapListEntry struct {
	OrgID, PodID, InboxID, Direction, ListType, Entry, EntryType, Reason string
	ReadOnly                                                             bool
	Seq                                                                  uint64
	CreatedAt                                                            time.Time
}

type snapKey struct {
	ID, Secret, Prefix, Name string
	OrgID, PodID, InboxID    string
	Perms                    map[string]bool
	Seq                      uint64
	CreatedAt, UpdatedAt     time.Time
	UsedAt                   time.Time
}

type snapAttachment struct {
	ID, Filename, ContentType, Disposition, ContentID string
	Data                                              []byte
}

type snapMessage struct {
	InboxID, ThreadID, MessageID string
	Labels                       []string
	Timestamp                    time.Time
	CreatedAt, UpdatedAt         time.Time
	From                         string
	To, Cc, Bcc, ReplyTo         []string
	Subject, Text, HTML          string
	ExtractedText, ExtractedHTML string
	Preview                      string
	Attachments                  []snapAttachment
	InReplyTo                    string
	References                   []string
	Headers                      map[string]string
	Size                         int
	Seq                          uint64
	Raw                          []byte
	Sent                         bool
}

type snapThread struct {
	ID, InboxID string
	MessageIDs  []string // in arrival order, within InboxID
	Seq         uint64
	CreatedAt   time.Time
}

type snapWebhook struct {
	ID, OrgID, URL, Secret, ClientID string
	EventTypes, PodIDs, InboxIDs     []string
	Headers                          map[string]string
	Enabled                          bool
	ScopePodID, ScopeInboxID         string
	Seq                              uint64
	CreatedAt, UpdatedAt             time.Time
}

type snapDomain struct {
	Name, OrgID, PodID, ClientID, Status                string
	FeedbackEnabled, SubdomainsEnabled, TrackingEnabled bool
	Seq                                                 uint64
	CreatedAt, UpdatedAt                                time.Time
}

type snapOutbox struct {
	OrgID string
	Msg   OutboxMessage
}

type snapIdemEntry struct {
	OrgID, Key, Fingerprint string
	Body                    []byte
	CompletedAt             time.Time
}

// snapshotLocked captures the provider state; the caller holds s.mu and
// encodes the result before releasing it (byte slices are shared, not
// copied).
func (s *Server) snapshotLocked() snapshot {
	st := &s.state
	out := snapshot{Version: snapshotVersion, Seq: st.seq}
	for _, o := range st.orgs {
		out.Orgs = append(out.Orgs, snapOrg{o.id, o.name, o.podID, o.createdAt, o.updatedAt})
	}
	for _, p := range st.pods {
		out.Pods = append(out.Pods, snapPod{p.id, p.orgID, p.name, p.clientID, p.seq, p.createdAt, p.updatedAt})
	}
	for _, ib := range st.inboxes {
		out.Inboxes = append(out.Inboxes, snapInbox{ib.id, ib.orgID, ib.podID, ib.displayName, ib.clientID,
			copyAnyMap(ib.metadata), ib.seq, ib.createdAt, ib.updatedAt, nil})
	}
	for _, k := range st.keys {
		out.Keys = append(out.Keys, snapKey{k.id, k.secret, k.prefix, k.name, k.orgID, k.podID, k.inboxID,
			copyBoolMap(k.perms), k.seq, k.createdAt, k.updatedAt, k.usedAt})
	}
	inboxIDs := make([]string, 0, len(st.inboxMsgs))
	for id := range st.inboxMsgs {
		inboxIDs = append(inboxIDs, id)
	}
	sort.Strings(inboxIDs)
	for _, id := range inboxIDs {
		for _, m := range st.inboxMsgs[id] {
			sm := snapMessage{InboxID: m.inboxID, ThreadID: m.threadID, MessageID: m.messageID, Labels: copyStrings(m.labels),
				Timestamp: m.timestamp, CreatedAt: m.createdAt, UpdatedAt: m.updatedAt, From: m.from,
				To: copyStrings(m.to), Cc: copyStrings(m.cc), Bcc: copyStrings(m.bcc), ReplyTo: copyStrings(m.replyTo),
				Subject: m.subject, Text: m.text, HTML: m.html, ExtractedText: m.extractedText, ExtractedHTML: m.extractedHTML,
				Preview: m.preview, InReplyTo: m.inReplyTo, References: copyStrings(m.references),
				Headers: copyStringMap(m.headers), Size: m.size, Seq: m.seq, Raw: m.raw, Sent: m.sent}
			for _, a := range m.attachments {
				sm.Attachments = append(sm.Attachments, snapAttachment{a.id, a.filename, a.contentType, a.disposition, a.contentID, a.data})
			}
			out.Messages = append(out.Messages, sm)
		}
	}
	for _, th := range st.threads {
		t := snapThread{ID: th.id, InboxID: th.inboxID, Seq: th.seq, CreatedAt: th.createdAt}
		for _, m := range th.messages {
			t.MessageIDs = append(t.MessageIDs, m.messageID)
		}
		out.Threads = append(out.Threads, t)
	}
	for _, w := range st.webhooks {
		out.Webhooks = append(out.Webhooks, snapWebhook{w.id, w.orgID, w.url, w.secret, w.clientID,
			copyStrings(w.eventTypes), copyStrings(w.podIDs), copyStrings(w.inboxIDs), copyStringMap(w.headers),
			w.enabled, w.scopePodID, w.scopeInboxID, w.seq, w.createdAt, w.updatedAt})
	}
	for _, e := range st.lists {
		out.Lists = append(out.Lists, snapListEntry{e.orgID, e.podID, e.inboxID, e.direction, e.listType, e.entry, e.entryType,
			e.reason, e.readOnly, e.seq, e.createdAt})
	}
	sort.Slice(out.Lists, func(i, j int) bool { return out.Lists[i].Seq < out.Lists[j].Seq })
	for _, d := range st.domains {
		out.Domains = append(out.Domains, snapDomain{d.name, d.orgID, d.podID, d.clientID, d.status,
			d.feedbackEnabled, d.subdomainsEnabled, d.trackingEnabled, d.seq, d.createdAt, d.updatedAt})
	}
	for _, e := range st.outbox {
		out.Outbox = append(out.Outbox, snapOutbox{e.orgID, e.msg})
	}
	for k, e := range st.idem {
		// An unfinished send has no answer to replay; it is dropped.
		if e.done {
			out.Idem = append(out.Idem, snapIdemEntry{k.orgID, k.key, e.fingerprint, e.body, e.completedAt})
		}
	}
	// Map iteration order is random: sort, so an unchanged state writes
	// the same bytes.
	sort.Slice(out.Orgs, func(i, j int) bool { return out.Orgs[i].ID < out.Orgs[j].ID })
	sort.Slice(out.Pods, func(i, j int) bool { return out.Pods[i].ID < out.Pods[j].ID })
	sort.Slice(out.Inboxes, func(i, j int) bool { return out.Inboxes[i].ID < out.Inboxes[j].ID })
	sort.Slice(out.Keys, func(i, j int) bool { return out.Keys[i].ID < out.Keys[j].ID })
	sort.Slice(out.Threads, func(i, j int) bool { return out.Threads[i].ID < out.Threads[j].ID })
	sort.Slice(out.Webhooks, func(i, j int) bool { return out.Webhooks[i].ID < out.Webhooks[j].ID })
	sort.Slice(out.Domains, func(i, j int) bool { return out.Domains[i].Name < out.Domains[j].Name })
	sort.Slice(out.Idem, func(i, j int) bool {
		if out.Idem[i].OrgID != out.Idem[j].OrgID {
			return out.Idem[i].OrgID < out.Idem[j].OrgID
		}
		return out.Idem[i].Key < out.Idem[j].Key
	})
	return out
}

// restoreLocked replaces the provider state with snap; the caller holds
// s.mu on a state fresh from init.
func (s *Server) restoreLocked(snap snapshot) error {
	if snap.Version != snapshotVersion {
		return fmt.Errorf("unsupported state file version %d (want %d)", snap.Version, snapshotVersion)
	}
	st := &s.state
	st.seq = snap.Seq
	for _, o := range snap.Orgs {
		st.orgs[o.ID] = &organization{id: o.ID, name: o.Name, podID: o.PodID, createdAt: o.CreatedAt, updatedAt: o.UpdatedAt}
	}
	for _, p := range snap.Pods {
		st.pods[p.ID] = &pod{id: p.ID, orgID: p.OrgID, name: p.Name, clientID: p.ClientID, seq: p.Seq, createdAt: p.CreatedAt, updatedAt: p.UpdatedAt}
	}
	for _, ib := range snap.Inboxes {
		st.inboxes[ib.ID] = &inbox{id: ib.ID, orgID: ib.OrgID, podID: ib.PodID, displayName: ib.DisplayName, clientID: ib.ClientID,
			metadata: ib.Metadata, seq: ib.Seq, createdAt: ib.CreatedAt, updatedAt: ib.UpdatedAt}
		if len(ib.BlockList) > 0 {
			s.setInboxBlockListLocked(st.inboxes[ib.ID], ib.BlockList)
		}
	}
	for _, k := range snap.Keys {
		key := &apiKey{id: k.ID, secret: k.Secret, prefix: k.Prefix, name: k.Name, orgID: k.OrgID, podID: k.PodID, inboxID: k.InboxID,
			perms: k.Perms, seq: k.Seq, createdAt: k.CreatedAt, updatedAt: k.UpdatedAt, usedAt: k.UsedAt}
		st.keys[key.id] = key
		st.keyBySecret[key.secret] = key
	}
	for _, sm := range snap.Messages {
		m := &message{inboxID: sm.InboxID, threadID: sm.ThreadID, messageID: sm.MessageID, labels: sm.Labels,
			timestamp: sm.Timestamp, createdAt: sm.CreatedAt, updatedAt: sm.UpdatedAt, from: sm.From,
			to: sm.To, cc: sm.Cc, bcc: sm.Bcc, replyTo: sm.ReplyTo, subject: sm.Subject, text: sm.Text, html: sm.HTML,
			extractedText: sm.ExtractedText, extractedHTML: sm.ExtractedHTML, preview: sm.Preview, inReplyTo: sm.InReplyTo,
			references: sm.References, headers: sm.Headers, size: sm.Size, seq: sm.Seq, raw: sm.Raw, sent: sm.Sent}
		for _, a := range sm.Attachments {
			m.attachments = append(m.attachments, &attachment{id: a.ID, filename: a.Filename, contentType: a.ContentType,
				disposition: a.Disposition, contentID: a.ContentID, data: a.Data})
		}
		st.messages[msgKey{m.inboxID, m.messageID}] = m
		st.inboxMsgs[m.inboxID] = append(st.inboxMsgs[m.inboxID], m)
	}
	for _, t := range snap.Threads {
		th := &thread{id: t.ID, inboxID: t.InboxID, seq: t.Seq, createdAt: t.CreatedAt}
		for _, id := range t.MessageIDs {
			m := st.messages[msgKey{t.InboxID, id}]
			if m == nil {
				return fmt.Errorf("thread %s names a message %s that the file does not hold", t.ID, id)
			}
			th.messages = append(th.messages, m)
		}
		st.threads[th.id] = th
	}
	for _, w := range snap.Webhooks {
		st.webhooks[w.ID] = &webhook{id: w.ID, orgID: w.OrgID, url: w.URL, secret: w.Secret, clientID: w.ClientID,
			eventTypes: w.EventTypes, podIDs: w.PodIDs, inboxIDs: w.InboxIDs, headers: w.Headers, enabled: w.Enabled,
			scopePodID: w.ScopePodID, scopeInboxID: w.ScopeInboxID, seq: w.Seq, createdAt: w.CreatedAt, updatedAt: w.UpdatedAt}
	}
	for _, e := range snap.Lists {
		le := &listEntry{orgID: e.OrgID, podID: e.PodID, inboxID: e.InboxID, direction: e.Direction, listType: e.ListType,
			entry: e.Entry, entryType: e.EntryType, reason: e.Reason, readOnly: e.ReadOnly, seq: e.Seq, createdAt: e.CreatedAt}
		st.lists[le.key()] = le
	}
	for _, d := range snap.Domains {
		st.domains[d.Name] = &domain{name: d.Name, orgID: d.OrgID, podID: d.PodID, clientID: d.ClientID, status: d.Status,
			feedbackEnabled: d.FeedbackEnabled, subdomainsEnabled: d.SubdomainsEnabled, trackingEnabled: d.TrackingEnabled,
			seq: d.Seq, createdAt: d.CreatedAt, updatedAt: d.UpdatedAt}
	}
	for _, e := range snap.Outbox {
		st.outbox = append(st.outbox, &outboxEntry{orgID: e.OrgID, msg: e.Msg})
	}
	for _, e := range snap.Idem {
		st.idem[idemKey{e.OrgID, e.Key}] = &idemEntry{fingerprint: e.Fingerprint, done: true, body: e.Body, completedAt: e.CompletedAt}
	}
	return nil
}

// loadStateFile restores the state saved in path; a missing file is an
// empty emulator.
func (s *Server) loadStateFile(path string) error {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read emulator state: %w", err)
	}
	var snap snapshot
	if err := json.Unmarshal(b, &snap); err != nil {
		return fmt.Errorf("emulator state file %s is not readable (%v); remove it to start with an empty emulator", path, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.restoreLocked(snap); err != nil {
		return fmt.Errorf("emulator state file %s: %w; remove it to start with an empty emulator", path, err)
	}
	return nil
}

// markDirty records that the provider state may have changed and wakes
// the saver. It never blocks, so it may be called with s.mu held.
func (s *Server) markDirty() {
	if s.stateFile == "" {
		return
	}
	s.dirty.Store(true)
	select {
	case s.saveWake <- struct{}{}:
	default:
	}
}

// saveLoop writes the state file after changes until the server closes.
// Changes within saveCoalesce of each other are written once.
func (s *Server) saveLoop() {
	defer close(s.saverDone)
	for {
		select {
		case <-s.saveWake:
		case <-s.ctx.Done():
			return
		}
		// Coalesce a burst (a send and its receipts) into one write; a
		// crash loses at most this window.
		if !sleepCtx(s.ctx, saveCoalesce) {
			return
		}
		if err := s.saveStateFile(); err != nil {
			s.log.Error("emulator state not saved", "file", s.stateFile, "err", err)
		}
	}
}

// saveCoalesce is how long the saver waits for more changes before writing.
const saveCoalesce = 100 * time.Millisecond

// saveStateFile writes the state atomically (temporary file, then rename)
// when it changed since the last write. saveMu keeps the saver and Close
// from writing at once.
func (s *Server) saveStateFile() error {
	s.saveMu.Lock()
	defer s.saveMu.Unlock()
	if !s.dirty.Swap(false) {
		return nil
	}
	s.mu.Lock()
	snap := s.snapshotLocked()
	b, err := json.Marshal(snap)
	s.mu.Unlock()
	if err != nil {
		s.dirty.Store(true)
		return fmt.Errorf("encode emulator state: %w", err)
	}
	if err := writeFileAtomic(s.stateFile, b); err != nil {
		s.dirty.Store(true)
		return err
	}
	return nil
}

// writeFileAtomic replaces path with data, readable by the owner only (the
// state holds API keys and webhook secrets).
func writeFileAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("write emulator state: %w", err)
	}
	f, err := os.CreateTemp(dir, ".emulator-state-*")
	if err != nil {
		return fmt.Errorf("write emulator state: %w", err)
	}
	tmp := f.Name()
	_, werr := f.Write(data)
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp, path)
	}
	if werr != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write emulator state: %w", werr)
	}
	return nil
}

func copyStringMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func copyBoolMap(m map[string]bool) map[string]bool {
	if m == nil {
		return nil
	}
	out := make(map[string]bool, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func copyAnyMap(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
