package receive

import (
	"html"
	"mime"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/paperclipai/paperclipai/internal/agentmail"
	"github.com/paperclipai/paperclipai/internal/inbound/queue"
	"github.com/paperclipai/paperclipai/internal/store"
)

// PublicationHeader is the header our own outbound messages carry; a
// message with it is ours and never wakes an agent.
const PublicationHeader = "X-Paperclip-Publication-Id"

// maxTextChars caps retained text (docs/email-pipeline.md, "Retained mail").
const maxTextChars = 100_000

// automatic reports whether m is machine-generated mail that must never
// create a task, wake an agent or reopen a task (docs/email-pipeline.md,
// "Receiving rules"): RFC 3834
// Auto-Submitted other than "no", Precedence bulk/list/junk, X-Autoreply,
// X-Autorespond, RFC 3464 delivery status notifications (multipart/report)
// and mailer-daemon senders.
func automatic(m *agentmail.Message) bool {
	if v, ok := m.Header("Auto-Submitted"); ok && !strings.EqualFold(strings.TrimSpace(v), "no") {
		return true
	}
	if v, ok := m.Header("Precedence"); ok {
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "bulk", "list", "junk":
			return true
		}
	}
	if _, ok := m.Header("X-Autoreply"); ok {
		return true
	}
	if _, ok := m.Header("X-Autorespond"); ok {
		return true
	}
	if v, ok := m.Header("Content-Type"); ok {
		if mt, _, err := mime.ParseMediaType(v); err == nil && mt == "multipart/report" {
			return true
		} else if err != nil && strings.HasPrefix(strings.ToLower(strings.TrimSpace(v)), "multipart/report") {
			return true
		}
	}
	local, _, _ := strings.Cut(queue.SenderAddress(m.From), "@")
	switch local {
	case "mailer-daemon", "postmaster":
		return true
	}
	return false
}

// own reports whether m is our own outbound mail, judged by what a sender
// cannot forge: the provider's sent label, or published (m is the provider
// message of one of our publications, see publicationClaim). Mail from the
// inbox's own address counts too (an agent mailing itself must not loop);
// a forged From of our address fails the provider's sender
// authentication and is filtered as unauthenticated before this. Our
// publication header alone proves nothing: anyone can write it.
func own(m *agentmail.Message, address string, published bool) bool {
	if queue.HasLabel(m.Labels, "sent") || published {
		return true
	}
	return address != "" && strings.EqualFold(queue.SenderAddress(m.From), address)
}

// publicationClaim returns the publication id m's publication header
// names, when it has the shape of one. It is only a claim: the caller
// checks that the named publication produced exactly this provider message.
func publicationClaim(m *agentmail.Message) (string, bool) {
	v, ok := m.Header(PublicationHeader)
	v = strings.TrimSpace(v)
	return v, ok && store.ValidID(v)
}

var (
	scriptStyleRE = regexp.MustCompile(`(?is)<(script|style)\b[^>]*>.*?</(script|style)\s*>`)
	tagRE         = regexp.MustCompile(`(?s)<[^>]*>`)
)

// bodyText computes a message's retained text (docs/email-pipeline.md, "Retained mail"): the
// provider's extracted reply text when extracted is true and present, else
// the plain text, else the HTML with script/style blocks removed and tags
// replaced by spaces, so remote images and tracking pixels are never kept.
func bodyText(m *agentmail.Message, extracted bool) string {
	var s string
	switch {
	case extracted && strings.TrimSpace(m.ExtractedText) != "":
		s = m.ExtractedText
	case strings.TrimSpace(m.Text) != "":
		s = m.Text
	case strings.TrimSpace(m.HTML) != "":
		s = scriptStyleRE.ReplaceAllString(m.HTML, " ")
		s = tagRE.ReplaceAllString(s, " ")
		s = html.UnescapeString(s)
	}
	return truncateRunes(strings.TrimSpace(s), maxTextChars)
}

func truncateRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n])
}

// escapeMarkdown backslash-escapes the Markdown metacharacters ,
// so remote images such as ![t](https://…) and links in
// mail can never render in a task comment.
func escapeMarkdown(s string) string {
	var b strings.Builder
	b.Grow(len(s) + len(s)/8)
	for _, r := range s {
		switch r {
		case '\\', '`', '*', '_', '{', '}', '[', ']', '(', ')', '<', '>', '!', '#', '|', '~':
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
