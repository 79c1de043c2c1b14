package emulator

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"strings"
	"time"

	"github.com/google/uuid"
)

// msgKey identifies a message: the same RFC Message-ID can exist in several
// inboxes (the sender's copy and a hosted recipient's copy).
type msgKey struct{ inboxID, messageID string }

type fileRef struct {
	att       *attachment
	raw       []byte // for raw .eml downloads
	name      string
	expiresAt time.Time
}

// state is the emulator's whole provider state, guarded by Server.mu.
type state struct {
	seq           uint64
	now           func() time.Time
	clockOffset   time.Duration // added to the wall clock (tests: late receipts)
	deliveryDelay time.Duration
	retryDelays   []time.Duration

	orgs        map[string]*organization
	pods        map[string]*pod
	inboxes     map[string]*inbox // by lower-case address
	keys        map[string]*apiKey
	keyBySecret map[string]*apiKey
	threads     map[string]*thread
	messages    map[msgKey]*message
	inboxMsgs   map[string][]*message
	files       map[string]*fileRef
	webhooks    map[string]*webhook
	domains     map[string]*domain // by lower-case name
	idem        map[idemKey]*idemEntry
	lists       map[listKey]*listEntry

	outbox     []*outboxEntry
	faults     []*fault
	requests   []RecordedRequest
	deliveries []WebhookAttempt
}

// maxRecorded bounds the request and webhook-attempt logs.
const maxRecorded = 10000

func (st *state) init(delay time.Duration) {
	st.now = func() time.Time { return time.Now().Add(st.clockOffset).UTC().Truncate(time.Millisecond) }
	st.deliveryDelay = delay
	st.retryDelays = defaultRetryDelays()
	st.orgs = map[string]*organization{}
	st.pods = map[string]*pod{}
	st.inboxes = map[string]*inbox{}
	st.keys = map[string]*apiKey{}
	st.keyBySecret = map[string]*apiKey{}
	st.threads = map[string]*thread{}
	st.messages = map[msgKey]*message{}
	st.inboxMsgs = map[string][]*message{}
	st.files = map[string]*fileRef{}
	st.webhooks = map[string]*webhook{}
	st.domains = map[string]*domain{}
	st.idem = map[idemKey]*idemEntry{}
	st.lists = map[listKey]*listEntry{}
}

func (st *state) nextSeq() uint64 {
	st.seq++
	return st.seq
}

// randomToken returns n random bytes, hex encoded.
func randomToken(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// randomAlnum returns n lower-case alphanumerics.
func randomAlnum(n int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, n)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}

func newWebhookSecret() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return "whsec_" + base64.StdEncoding.EncodeToString(b)
}

func newAPIKeySecret() string { return "am_us_" + randomToken(24) }

func keyPrefix(secret string) string {
	if len(secret) > 12 {
		return secret[:12]
	}
	return secret
}

func (s *Server) createOrgLocked(name string) *organization {
	now := s.state.now()
	org := &organization{id: uuid.NewString(), name: name, createdAt: now, updatedAt: now}
	p := &pod{id: uuid.NewString(), orgID: org.id, name: "default", seq: s.state.nextSeq(), createdAt: now, updatedAt: now}
	org.podID = p.id
	s.state.orgs[org.id] = org
	s.state.pods[p.id] = p
	return org
}

func (s *Server) addKeyLocked(orgID, podID, inboxID, name, secret string, perms map[string]bool) *apiKey {
	now := s.state.now()
	if secret == "" {
		secret = newAPIKeySecret()
	}
	k := &apiKey{
		id: uuid.NewString(), secret: secret, prefix: keyPrefix(secret), name: name,
		orgID: orgID, podID: podID, inboxID: inboxID, perms: perms,
		seq: s.state.nextSeq(), createdAt: now, updatedAt: now,
	}
	s.state.keys[k.id] = k
	s.state.keyBySecret[secret] = k
	return k
}

// lookupInbox finds an inbox by address, case-insensitively.
func (st *state) lookupInbox(addr string) *inbox {
	return st.inboxes[strings.ToLower(strings.TrimSpace(addr))]
}
func newUUID() string { return uuid.NewString() }
