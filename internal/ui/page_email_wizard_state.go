package ui

import (
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/paperclipai/paperclipai/internal/domain"
	"github.com/paperclipai/paperclipai/internal/email"
	"github.com/paperclipai/paperclipai/internal/store"
)

// wizState is the wizard's URL state.
type wizState struct {
	Step, Agent, Connection, Mode, Username, Domain, Inbox, Receive string
	Taken                                                           []string
	AllowInboxKey                                                   bool
}

var (
	uiUsernameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]*$`)
	nonUsername  = regexp.MustCompile(`[^a-z0-9._-]+`)
)

func readWizState(v url.Values) wizState {
	s := wizState{Step: v.Get("step"), Mode: v.Get("mode"), Receive: v.Get("receive"), AllowInboxKey: v.Get("allowInboxKey") == "1"}
	if id := v.Get("agent"); store.ValidID(id) {
		s.Agent = id
	}
	if id := v.Get("connection"); store.ValidID(id) {
		s.Connection = id
	}
	if u := strings.ToLower(strings.TrimSpace(v.Get("username"))); len(u) <= 64 {
		s.Username = u
	}
	if d := strings.ToLower(strings.TrimSpace(v.Get("domain"))); len(d) <= 253 {
		s.Domain = d
	}
	if in := strings.ToLower(strings.TrimSpace(v.Get("inbox"))); len(in) <= 254 {
		s.Inbox = in
	}
	if s.Mode != "existing" {
		s.Mode = "new"
	}
	if s.Receive != domain.ReceiveWebhook {
		s.Receive = domain.ReceiveWebSocket
	}
	if s.Step != stepAddress && s.Step != stepReview {
		s.Step = stepAgent
	}
	for _, t := range strings.Split(v.Get("taken"), ",") {
		t = strings.ToLower(strings.TrimSpace(t))
		if t != "" && len(t) <= 254 && len(s.Taken) < 20 && !slices.Contains(s.Taken, t) {
			s.Taken = append(s.Taken, t)
		}
	}
	return s
}

// query encodes the state for step.
func (s wizState) query(step string) string {
	q := url.Values{"step": {step}}
	set := func(k, v string) {
		if v != "" {
			q.Set(k, v)
		}
	}
	set("agent", s.Agent)
	set("connection", s.Connection)
	if s.Mode == "existing" {
		q.Set("mode", "existing")
		set("inbox", s.Inbox)
	} else {
		set("username", s.Username)
	}
	set("domain", s.Domain)
	if s.Receive == domain.ReceiveWebhook {
		q.Set("receive", s.Receive)
	}
	if len(s.Taken) > 0 {
		q.Set("taken", strings.Join(s.Taken, ","))
	}
	if s.AllowInboxKey {
		q.Set("allowInboxKey", "1")
	}
	return q.Encode()
}

// address is the address the state describes ("" when incomplete).
func (s wizState) address() string {
	if s.Mode == "existing" {
		return s.Inbox
	}
	if s.Username == "" {
		return ""
	}
	d := s.Domain
	if d == "" {
		d = email.DefaultDomain
	}
	return s.Username + "@" + d
}

// defaultUsername derives an address from an agent's name.
func defaultUsername(name string) string {
	u := nonUsername.ReplaceAllString(strings.ToLower(name), "-")
	u = strings.Trim(u, "-.")
	if len(u) > 64 {
		u = strings.Trim(u[:64], "-.")
	}
	return u
}

// suggestions are alternatives to a taken username, none known taken.
func suggestions(u, dom, rid string, known func(string) bool) []string {
	var out []string
	for _, suffix := range []string{"-agent", "-team", "-" + rid[:6]} {
		base := u
		if len(base)+len(suffix) > 64 {
			base = base[:64-len(suffix)]
		}
		s := base + suffix
		if !known(s+"@"+dom) && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

func appendTaken(list []string, addr string) []string {
	addr = strings.ToLower(addr)
	if addr == "" || slices.Contains(list, addr) {
		return list
	}
	if len(list) >= 20 {
		list = list[1:]
	}
	return append(list, addr)
}
