package ui

import (
	"html/template"
	"strings"
)

// RenderPlainText escapes s for HTML; line breaks are kept by the CSS
// (white-space: pre-wrap), so nothing else is needed. Used for task
// descriptions, email text and run logs.
func RenderPlainText(s string) template.HTML {
	return template.HTML(template.HTMLEscapeString(s))
}

// markdownEscapable are the characters the inbound pipeline backslash-escapes
// in comments written for agents; a human sees them unescaped.
const markdownEscapable = "\\`*_{}[]()<>!#|~"

// RenderComment renders a comment body with a deliberately tiny, safe
// subset: backslash escapes are removed for display and **bold** becomes
// <strong>. Everything else is literal text: no links, images, raw HTML or
// headings. All text is HTML-escaped before it is wrapped.
func RenderComment(s string) template.HTML {
	var plain strings.Builder
	var out strings.Builder
	bold := false
	flush := func() {
		out.WriteString(template.HTMLEscapeString(plain.String()))
		plain.Reset()
	}
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case ch == '\\' && i+1 < len(s) && strings.IndexByte(markdownEscapable, s[i+1]) >= 0:
			plain.WriteByte(s[i+1])
			i++
		case ch == '*' && i+1 < len(s) && s[i+1] == '*' && (bold || strings.Contains(s[i+2:], "**")):
			flush()
			if bold {
				out.WriteString("</strong>")
			} else {
				out.WriteString("<strong>")
			}
			bold = !bold
			i++
		default:
			plain.WriteByte(ch)
		}
	}
	flush()
	if bold {
		out.WriteString("</strong>")
	}
	return template.HTML(out.String())
}
