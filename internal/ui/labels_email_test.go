package ui

import (
	"net/url"
	"testing"
	"time"

	"github.com/paperclipai/paperclipai/internal/agentmail"
	"github.com/paperclipai/paperclipai/internal/domain"
)

// Every email state the domain and the provider define has a label, and
// every inbox status (with and without an address or an error) has a
// badge, a tone and a sentence.
func TestEmailLabelsCoverStates(t *testing.T) {
	cases := map[string]struct {
		labels map[string]string
		values []string
	}{
		"receive mode":   {receiveLabels, []string{domain.ReceiveWebSocket, domain.ReceiveWebhook}},
		"receive review": {receiveReviewLabels, []string{domain.ReceiveWebSocket, domain.ReceiveWebhook}},
		"delivery state": {deliveryStateLabels, []string{string(domain.DeliveryReceived), string(domain.DeliveryProcessing),
			string(domain.DeliveryProcessed), string(domain.DeliveryFiltered), string(domain.DeliveryRetry)}},
		"event kind": {eventKindLabels, []string{"message.received", "message.sent", "message.delivered", "message.bounced",
			"message.complained", "message.rejected"}},
		"scope":              {scopeLabels, []string{agentmail.ScopeOrganization, agentmail.ScopePod, agentmail.ScopeInbox, "unavailable"}},
		"conversation state": {conversationStateLabels, []string{"waiting", "active"}},
	}
	for name, c := range cases {
		for _, v := range c.values {
			if c.labels[v] == "" {
				t.Errorf("%s %q has no label", name, v)
			}
		}
	}
	addr, reason := "a@agentmail.to", "Email operation failed; retry or reconnect the inbox."
	for _, s := range []domain.EmailEndpointSummary{
		{Status: domain.EndpointActive, Address: &addr},
		{Status: domain.EndpointActive, Address: &addr, LastError: &reason},
		{Status: domain.EndpointPaused, Address: &addr},
		{Status: domain.EndpointDraft},
		{Status: domain.EndpointDraft, Address: &addr},
		{Status: domain.EndpointArchived, Address: &addr},
	} {
		v := newInboxView(s, agentIndex{})
		if v.Key == "" || v.Label == "" || v.Tone == "" || v.Sentence == "" {
			t.Errorf("inbox %s (address %v, error %v): %+v", s.Status, s.Address != nil, s.LastError != nil, v)
		}
	}
	if v := newInboxView(domain.EmailEndpointSummary{Status: domain.EndpointActive, LastError: &reason}, agentIndex{}); v.Key != inboxKeyAttention ||
		v.Sentence != "Reason: "+reason {
		t.Errorf("an active inbox with an error: %+v", v)
	}
	if got := scopeLabel("inbox", "x@agentmail.to"); got != "Inbox key · x@agentmail.to" {
		t.Errorf("inbox scope label: %q", got)
	}
}

// The wizard's pure rules: default usernames, suggestions, the URL state.
func TestWizardRules(t *testing.T) {
	for in, want := range map[string]string{"Mail Assistant": "mail-assistant", "  Ops/Support!! ": "ops-support", "Ünïcode Bot": "n-code-bot",
		"a.b_c-d": "a.b_c-d"} {
		if got := defaultUsername(in); got != want {
			t.Errorf("defaultUsername(%q) = %q, want %q", in, got, want)
		}
	}
	long := ""
	for len(long) < 64 {
		long += "abcdefgh"
	}
	if got := defaultUsername(long + "xyz"); len(got) != 64 {
		t.Errorf("default username longer than 64: %d", len(got))
	}
	rid := "0123456789ab-0000-0000-0000-000000000000"
	got := suggestions("taken", "agentmail.to", rid, func(a string) bool { return a == "taken-team@agentmail.to" })
	if len(got) != 2 || got[0] != "taken-agent" || got[1] != "taken-012345" {
		t.Errorf("suggestions: %v", got)
	}
	for _, s := range suggestions(long, "agentmail.to", rid, func(string) bool { return false }) {
		if len(s) > 64 {
			t.Errorf("suggestion longer than 64: %q", s)
		}
	}
	st := wizState{Agent: "a", Connection: "c", Mode: "new", Username: "support", Domain: "agentmail.to",
		Receive: domain.ReceiveWebhook, Taken: []string{"x@agentmail.to"}, AllowInboxKey: true}
	q, err := url.ParseQuery(st.query(stepReview))
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"apiKey", "newKey", "keyHandle"} {
		if q.Has(bad) {
			t.Errorf("wizard URL carries %s", bad)
		}
	}
	if back := readWizState(q); back.Username != "support" || back.Receive != domain.ReceiveWebhook || !back.AllowInboxKey ||
		len(back.Taken) != 1 || back.Step != stepReview {
		t.Errorf("state round trip: %+v", back)
	}
	if st.address() != "support@agentmail.to" {
		t.Errorf("address: %q", st.address())
	}
}

// A sealed key handle opens only for its company, setup and user, and
// only for ten minutes.
func TestKeyHandle(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	u, err := New(Deps{MasterKey: make([]byte, 32), Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	h, err := u.sealKey("co", "rid", "user", "am_secret")
	if err != nil {
		t.Fatal(err)
	}
	if k, err := u.openKey("co", "rid", "user", h); err != nil || k != "am_secret" {
		t.Fatalf("open: %q %v", k, err)
	}
	for _, b := range [][3]string{{"other", "rid", "user"}, {"co", "rid2", "user"}, {"co", "rid", ""}} {
		if _, err := u.openKey(b[0], b[1], b[2], h); err == nil {
			t.Errorf("handle opened for %v", b)
		}
	}
	if _, err := u.openKey("co", "rid", "user", h[:len(h)-2]+"AA"); err == nil {
		t.Error("a tampered handle opened")
	}
	now = now.Add(keyHandleTTL + time.Second)
	if _, err := u.openKey("co", "rid", "user", h); err == nil {
		t.Error("an expired handle opened")
	}
}
