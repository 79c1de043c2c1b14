package emulator

import (
	"regexp"
	"strings"
)

// Reply extraction: the emulator's own small take on "only the new content
// of a reply". It walks lines and cuts at the first quote header, forwarded
// or original-message separator, signature delimiter, or block of
// ">"-quoted lines, then trims trailing blank lines.

var (
	onWroteOneLine = regexp.MustCompile(`(?i)^\s*on\b.{0,300}\bwrote:\s*$`)
	onStart        = regexp.MustCompile(`(?i)^\s*on\b.*\S`)
	wroteEnd       = regexp.MustCompile(`(?i)^.{0,200}\bwrote:\s*$`)
	originalMsg    = regexp.MustCompile(`(?i)^\s*-{2,}\s*(original message|forwarded message)\s*-{2,}\s*$`)
	outlookFrom    = regexp.MustCompile(`(?i)^\s*\*?from:\*?\s+\S`)
	outlookNext    = regexp.MustCompile(`(?i)^\s*\*?(sent|date|to|subject):\*?\s`)
	sentFromMy     = regexp.MustCompile(`(?i)^\s*sent from my \S`)
	underscoreSep  = regexp.MustCompile(`^\s*_{10,}\s*$`)
)

// extractReplyText returns text without quoted history and signature.
func extractReplyText(text string) string {
	text = strings.ReplaceAll(text, "\r\n", "\n")
	lines := strings.Split(text, "\n")
	cut := len(lines)
	for i, line := range lines {
		switch {
		case line == "-- " || line == "--":
			cut = i
		case strings.HasPrefix(strings.TrimLeft(line, " \t"), ">"):
			cut = i
		case onWroteOneLine.MatchString(line):
			cut = i
		case onStart.MatchString(line) && i+1 < len(lines) && wroteEnd.MatchString(lines[i+1]) && !onWroteOneLine.MatchString(lines[i+1]):
			// Gmail wraps long attributions over two lines.
			cut = i
		case originalMsg.MatchString(line), underscoreSep.MatchString(line):
			cut = i
		case outlookFrom.MatchString(line) && i+1 < len(lines) && outlookNext.MatchString(lines[i+1]):
			cut = i
		case sentFromMy.MatchString(line):
			cut = i
		default:
			continue
		}
		break
	}
	out := strings.TrimRight(strings.Join(lines[:cut], "\n"), " \t\n")
	return out
}

var htmlQuoteMarkers = []*regexp.Regexp{
	regexp.MustCompile(`(?i)<div[^>]*class="[^"]*gmail_quote`),
	regexp.MustCompile(`(?i)<blockquote`),
	regexp.MustCompile(`(?i)<div[^>]*id="?(divRplyFwdMsg|OLK_SRC_BODY_SECTION)`),
	regexp.MustCompile(`(?i)<hr[^>]*id="?stopSpelling`),
	regexp.MustCompile(`(?i)<div[^>]*style="[^"]*border-top:\s*solid\s*#(E1E1E1|B5C4DF)`),
}

// extractReplyHTML cuts html at the first quoted-history marker (Gmail
// quote, blockquote, Outlook reply header). The result may leave elements
// unclosed, which HTML renderers tolerate.
func extractReplyHTML(html string) string {
	cut := len(html)
	for _, re := range htmlQuoteMarkers {
		if loc := re.FindStringIndex(html); loc != nil && loc[0] < cut {
			cut = loc[0]
		}
	}
	return strings.TrimSpace(html[:cut])
}
