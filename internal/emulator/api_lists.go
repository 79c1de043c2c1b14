package emulator

import (
	"net/mail"
	"sort"
	"strings"
	"time"
)

// The allow/block lists (agentmail-api.md §12, "Lists"): entries scoped to
// the organization, a pod or an inbox, per direction (send, receive,
// reply) and list type (allow, block), each an email address or a domain.
// Wire types follow the official SDK (ListEntry / PodListEntry).

// listEntry is one allow/block list entry. Its scope is the inbox when
// inboxID is set, else the pod when podID is set, else the organization.
// An inbox entry also carries its inbox's pod, as the wire does.
type listEntry struct {
	orgID, podID, inboxID string
	direction, listType   string
	entry, entryType      string
	reason                string
	readOnly              bool
	seq                   uint64
	createdAt             time.Time
}

// listKey identifies an entry: one per scope, direction, type and value.
type listKey struct {
	orgID, podID, inboxID, direction, listType, entry string
}

func (e *listEntry) key() listKey {
	return listKey{e.orgID, e.podID, e.inboxID, e.direction, e.listType, e.entry}
}

// wireListEntry is ListEntry (organization scope) and PodListEntry (pod
// and inbox scopes: pod_id required, inbox_id for inbox entries).
type wireListEntry struct {
	Entry          string  `json:"entry"`
	OrganizationID string  `json:"organization_id"`
	Reason         *string `json:"reason,omitempty"`
	Direction      string  `json:"direction"`
	ListType       string  `json:"list_type"`
	EntryType      string  `json:"entry_type"`
	CreatedAt      string  `json:"created_at"`
	ReadOnly       *bool   `json:"read_only,omitempty"`
	PodID          string  `json:"pod_id,omitempty"`
	InboxID        string  `json:"inbox_id,omitempty"`
}

func listEntryWire(e *listEntry) wireListEntry {
	w := wireListEntry{Entry: e.entry, OrganizationID: e.orgID, Direction: e.direction, ListType: e.listType,
		EntryType: e.entryType, CreatedAt: ts(e.createdAt), PodID: e.podID, InboxID: e.inboxID}
	if e.reason != "" {
		r := e.reason
		w.Reason = &r
	}
	if e.readOnly {
		t := true
		w.ReadOnly = &t
	}
	return w
}

var (
	listDirections = map[string]bool{"send": true, "receive": true, "reply": true}
	listTypes      = map[string]bool{"allow": true, "block": true}
)

// listScopeLocked resolves the scope of a lists route: the inbox or pod
// in its path, or the organization (org keys only); and validates the
// direction and type segments.
func (c *call) listScopeLocked() (podID, inboxID string, err error) {
	if !listDirections[c.p["direction"]] {
		return "", "", errValidation("direction must be one of send, receive, reply")
	}
	if !listTypes[c.p["type"]] {
		return "", "", errValidation("type must be one of allow, block")
	}
	if id, ok := c.p["inbox_id"]; ok {
		ib, err := c.inboxLocked(id)
		if err != nil {
			return "", "", err
		}
		return ib.podID, ib.id, nil
	}
	if _, ok := c.p["pod_id"]; ok {
		p, err := c.podLocked()
		if err != nil {
			return "", "", err
		}
		return p.id, "", nil
	}
	if err := requireOrgScope(c.key); err != nil {
		return "", "", err
	}
	return "", "", nil
}

// normalizeListEntry validates an entry value: an email address or a
// domain, lower-cased. It returns the entry type.
func normalizeListEntry(v string) (entry, entryType string, err error) {
	v = strings.ToLower(strings.TrimSpace(v))
	if v == "" {
		return "", "", errValidation("entry is required")
	}
	if strings.Contains(v, "@") {
		a, perr := mail.ParseAddress(v)
		if perr != nil || a.Address != v || a.Name != "" {
			return "", "", errValidation("entry: invalid email address")
		}
		if !domainPattern.MatchString(domainPart(v)) {
			return "", "", errValidation("entry: invalid email address")
		}
		return v, "email", nil
	}
	if !domainPattern.MatchString(v) {
		return "", "", errValidation("entry: invalid domain")
	}
	return v, "domain", nil
}

func (c *call) listEntries() (any, error) {
	lp, err := c.listParams()
	if err != nil {
		return nil, err
	}
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	podID, inboxID, err := c.listScopeLocked()
	if err != nil {
		return nil, err
	}
	var all []*listEntry
	for _, e := range c.s.state.lists {
		if e.orgID == c.key.orgID && e.podID == podID && e.inboxID == inboxID &&
			e.direction == c.p["direction"] && e.listType == c.p["type"] {
			all = append(all, e)
		}
	}
	return listPage("entries", all, func(e *listEntry) sortKey { return sortKey{e.createdAt, e.seq} }, "entries", lp, listEntryWire)
}

func (c *call) getListEntry() (any, error) {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	podID, inboxID, err := c.listScopeLocked()
	if err != nil {
		return nil, err
	}
	v := strings.ToLower(strings.TrimSpace(c.p["entry"]))
	e := c.s.state.lists[listKey{c.key.orgID, podID, inboxID, c.p["direction"], c.p["type"], v}]
	if e == nil {
		return nil, errNotFound("List entry")
	}
	return listEntryWire(e), nil
}

// createListEntry adds an entry. Adding an entry the list already holds
// returns it unchanged [INFERRED: the provider's answer to a duplicate is
// not documented; an idempotent create is what a sync needs].
func (c *call) createListEntry() (any, error) {
	var req struct {
		Entry  string  `json:"entry"`
		Reason *string `json:"reason"`
	}
	if err := c.decode(&req, false); err != nil {
		return nil, err
	}
	entry, typ, err := normalizeListEntry(req.Entry)
	if err != nil {
		return nil, err
	}
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	podID, inboxID, err := c.listScopeLocked()
	if err != nil {
		return nil, err
	}
	st := &c.s.state
	e := &listEntry{orgID: c.key.orgID, podID: podID, inboxID: inboxID, direction: c.p["direction"], listType: c.p["type"],
		entry: entry, entryType: typ}
	if old := st.lists[e.key()]; old != nil {
		return listEntryWire(old), nil
	}
	if req.Reason != nil {
		e.reason = *req.Reason
	}
	e.seq, e.createdAt = st.nextSeq(), st.now()
	st.lists[e.key()] = e
	return listEntryWire(e), nil
}

func (c *call) deleteListEntry() (any, error) {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	podID, inboxID, err := c.listScopeLocked()
	if err != nil {
		return nil, err
	}
	k := listKey{c.key.orgID, podID, inboxID, c.p["direction"], c.p["type"], strings.ToLower(strings.TrimSpace(c.p["entry"]))}
	e := c.s.state.lists[k]
	if e == nil {
		return nil, errNotFound("List entry")
	}
	if e.readOnly {
		return nil, errForbidden("List entry is read-only", "Suppressed addresses cannot be removed.")
	}
	delete(c.s.state.lists, k)
	return noContent{}, nil
}

// listVerdictLocked decides whether mail from sender to ib passes the
// lists of direction (receive, or reply for a reply to the inbox's own
// mail). The most specific scope with an entry matching the sender
// decides (inbox, then pod, then organization; an address entry before a
// domain entry of the same scope; allow before block): an allow entry
// lets it through, a block entry blocks it. A sender no entry matches is
// blocked when some scope has an allow list for the direction (an active
// allow list admits only its entries), else let through.
func (s *Server) listVerdictLocked(ib *inbox, sender, direction string) (blocked bool) {
	addr := addrOnly(sender)
	dom := domainPart(sender)
	scopes := [][2]string{{ib.podID, ib.id}, {ib.podID, ""}, {"", ""}}
	anyAllow := false
	for _, sc := range scopes {
		for _, v := range []string{addr, dom} {
			if v == "" {
				continue
			}
			if s.state.lists[listKey{ib.orgID, sc[0], sc[1], direction, "allow", v}] != nil {
				return false
			}
			if s.state.lists[listKey{ib.orgID, sc[0], sc[1], direction, "block", v}] != nil {
				return true
			}
		}
	}
	for _, e := range s.state.lists {
		if e.orgID == ib.orgID && e.direction == direction && e.listType == "allow" &&
			(e.inboxID == ib.id || (e.inboxID == "" && (e.podID == ib.podID || e.podID == ""))) {
			anyAllow = true
			break
		}
	}
	return anyAllow
}

// isReplyToOwnLocked reports whether inbound mail answers a message this
// inbox sent (its In-Reply-To names one): such mail is checked against
// the reply lists only.
func (s *Server) isReplyToOwnLocked(ib *inbox, inReplyTo string) bool {
	if inReplyTo == "" {
		return false
	}
	m := s.state.messages[msgKey{ib.id, inReplyTo}]
	return m != nil && (m.sent || m.hasLabel("sent"))
}

// ListEntry is one allow/block list entry as the emulator holds it, for
// tests and the control API.
type ListEntry struct {
	PodID     string `json:"pod_id,omitempty"`
	InboxID   string `json:"inbox_id,omitempty"`
	Direction string `json:"direction"`
	ListType  string `json:"list_type"`
	Entry     string `json:"entry"`
	EntryType string `json:"entry_type"`
}

// ListEntries returns the entries of inboxID's own lists (inbox scope),
// sorted by direction, type and value.
func (s *Server) ListEntries(inboxID string) []ListEntry {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []ListEntry{}
	ib := s.state.lookupInbox(inboxID)
	if ib == nil {
		return out
	}
	for _, e := range s.state.lists {
		if e.orgID == ib.orgID && e.inboxID == ib.id {
			out = append(out, ListEntry{PodID: e.podID, InboxID: e.inboxID, Direction: e.direction, ListType: e.listType,
				Entry: e.entry, EntryType: e.entryType})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Direction != b.Direction {
			return a.Direction < b.Direction
		}
		if a.ListType != b.ListType {
			return a.ListType < b.ListType
		}
		return a.Entry < b.Entry
	})
	return out
}

// SetListEntry adds (or with remove, deletes) one entry of inboxID's own
// lists, as a change made in the AgentMail console would.
func (s *Server) SetListEntry(inboxID, direction, listType, value string, remove bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	ib := s.state.lookupInbox(inboxID)
	if ib == nil {
		return ErrNoSuchInbox
	}
	entry, typ, aerr := normalizeListEntry(value)
	if aerr != nil {
		return aerr
	}
	if !listDirections[direction] || !listTypes[listType] {
		return errValidation("bad direction or list type")
	}
	s.markDirty()
	e := &listEntry{orgID: ib.orgID, podID: ib.podID, inboxID: ib.id, direction: direction, listType: listType, entry: entry, entryType: typ}
	if remove {
		delete(s.state.lists, e.key())
		return nil
	}
	if s.state.lists[e.key()] == nil {
		e.seq, e.createdAt = s.state.nextSeq(), s.state.now()
		s.state.lists[e.key()] = e
	}
	return nil
}
