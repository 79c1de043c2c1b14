package domain

import (
	"fmt"
	"net/mail"
	"regexp"
	"slices"
	"strings"
)

// MaxSenderRuleEntries bounds each allow or block list of an inbox.
const MaxSenderRuleEntries = 1000

// SenderRuleLists is one direction's allow and block lists: lower-case
// addresses or domains.
type SenderRuleLists struct {
	Allow []string `json:"allow"`
	Block []string `json:"block"`
}

// SenderRules says who may write to an inbox: the receive lists for new
// mail, the reply lists for replies to the inbox's own sends (as
// AgentMail checks them).
type SenderRules struct {
	Receive SenderRuleLists `json:"receive"`
	Reply   SenderRuleLists `json:"reply"`
}

var senderDomainRE = regexp.MustCompile(`^(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$`)

// NormalizeSenderEntry validates one entry (an address or a domain) and
// returns it lower-cased.
func NormalizeSenderEntry(v string) (string, error) {
	e := strings.ToLower(strings.TrimSpace(v))
	if len(e) > 320 {
		return "", fmt.Errorf("%q is too long", truncateEntry(v))
	}
	if strings.Contains(e, "@") {
		a, err := mail.ParseAddress(e)
		if err != nil || a.Name != "" || a.Address != e {
			return "", fmt.Errorf("%q is not an email address", truncateEntry(v))
		}
		if !senderDomainRE.MatchString(e[strings.LastIndex(e, "@")+1:]) {
			return "", fmt.Errorf("%q is not an email address", truncateEntry(v))
		}
		return e, nil
	}
	if !senderDomainRE.MatchString(e) {
		return "", fmt.Errorf("%q is neither an email address nor a domain", truncateEntry(v))
	}
	return e, nil
}

func truncateEntry(v string) string {
	if len(v) > 80 {
		return v[:80] + "…"
	}
	return v
}

// Normalize validates every list (entries, at most MaxSenderRuleEntries
// each, never both allowed and blocked) and returns the rules with each
// list lower-cased, de-duplicated and sorted.
func (r SenderRules) Normalize() (SenderRules, error) {
	var out SenderRules
	for _, d := range []struct {
		name    string
		in      SenderRuleLists
		outList *SenderRuleLists
	}{{"receive", r.Receive, &out.Receive}, {"reply", r.Reply, &out.Reply}} {
		for _, l := range []struct {
			name string
			in   []string
			out  *[]string
		}{{"allow", d.in.Allow, &d.outList.Allow}, {"block", d.in.Block, &d.outList.Block}} {
			if len(l.in) > MaxSenderRuleEntries {
				return out, fmt.Errorf("%s.%s has %d entries; at most %d are allowed", d.name, l.name, len(l.in), MaxSenderRuleEntries)
			}
			list := make([]string, 0, len(l.in))
			for _, v := range l.in {
				e, err := NormalizeSenderEntry(v)
				if err != nil {
					return out, fmt.Errorf("%s.%s: %w", d.name, l.name, err)
				}
				list = append(list, e)
			}
			slices.Sort(list)
			*l.out = slices.Compact(list)
		}
		for _, e := range d.outList.Allow {
			if _, found := slices.BinarySearch(d.outList.Block, e); found {
				return out, fmt.Errorf("%s: %q is both allowed and blocked", d.name, e)
			}
		}
	}
	return out, nil
}

// Empty reports whether no list has an entry.
func (r SenderRules) Empty() bool {
	return len(r.Receive.Allow)+len(r.Receive.Block)+len(r.Reply.Allow)+len(r.Reply.Block) == 0
}

// Check decides whether mail from sender passes the rules, as AgentMail
// decides with its lists: a reply to the inbox's own send is checked
// against the reply lists only, other mail against the receive lists. An
// entry for the address decides before one for its domain, an allow
// entry before a block entry; a sender no entry matches is blocked when
// the allow list is not empty (an active allow list admits only its
// entries). entry is the matching block entry, or "" when the sender is
// blocked for missing from the allow list.
func (r SenderRules) Check(sender string, reply bool) (blocked bool, entry string) {
	lists := r.Receive
	if reply {
		lists = r.Reply
	}
	addr := strings.ToLower(strings.TrimSpace(sender))
	dom := ""
	if i := strings.LastIndex(addr, "@"); i >= 0 {
		dom = addr[i+1:]
	}
	for _, v := range []string{addr, dom} {
		if v == "" {
			continue
		}
		if slices.Contains(lists.Allow, v) {
			return false, ""
		}
		if slices.Contains(lists.Block, v) {
			return true, v
		}
	}
	return len(lists.Allow) > 0, ""
}
