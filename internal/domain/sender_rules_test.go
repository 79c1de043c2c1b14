package domain

import (
	"strings"
	"testing"
)

// Sender rules normalize (lower-case, de-duplicated, sorted, validated,
// bounded) and decide like AgentMail's lists: address before domain, allow
// before block, an active allow list admits only its entries, and replies
// to our own sends use the reply lists only.
func TestSenderRules(t *testing.T) {
	r, err := SenderRules{Receive: SenderRuleLists{Allow: []string{"Partner.ORG", "partner.org", "boss@corp.example"}, Block: []string{"corp.example"}},
		Reply: SenderRuleLists{Block: []string{"x@y.example"}}}.Normalize()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(r.Receive.Allow, ",") != "boss@corp.example,partner.org" || len(r.Reply.Allow) != 0 {
		t.Fatalf("normalized: %+v", r)
	}
	for _, c := range []struct {
		sender  string
		reply   bool
		blocked bool
		entry   string
	}{
		{"boss@corp.example", false, false, ""}, // address allow beats domain block
		{"other@corp.example", false, true, "corp.example"},
		{"a@partner.org", false, false, ""},
		{"a@stranger.example", false, true, ""},    // not on the active allow list
		{"a@stranger.example", true, false, ""},    // replies: reply lists only (no allow list)
		{"x@y.example", true, true, "x@y.example"}, // reply block
		{"x@y.example", false, true, ""},           // receive: not on the allow list
	} {
		b, e := r.Check(c.sender, c.reply)
		if b != c.blocked || e != c.entry {
			t.Errorf("Check(%s, reply=%v) = %v %q, want %v %q", c.sender, c.reply, b, e, c.blocked, c.entry)
		}
	}
	for _, bad := range []SenderRules{
		{Receive: SenderRuleLists{Block: []string{"no spaces@x.example"}}},
		{Receive: SenderRuleLists{Block: []string{"Jane <j@x.example>"}}},
		{Receive: SenderRuleLists{Block: []string{"localhost"}}},
		{Reply: SenderRuleLists{Allow: []string{"a.example"}, Block: []string{"A.EXAMPLE"}}},
		{Receive: SenderRuleLists{Allow: make([]string, MaxSenderRuleEntries+1)}},
	} {
		if _, err := bad.Normalize(); err == nil {
			t.Errorf("accepted %+v", bad)
		}
	}
}
