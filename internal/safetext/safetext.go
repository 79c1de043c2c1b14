// Package safetext refuses control characters in user text before it is
// stored or handed to a provider: NUL breaks PostgreSQL text columns, CR
// and LF in a header value or an API key split the header, and other
// controls hide text from people reading it. Text (bodies, comments) may
// keep tab, line feed and carriage return; a line (names, subjects,
// addresses, keys) may keep only tab.
//
// Text that arrives from outside without a person to answer (inbound
// email from the provider) cannot be refused, so CleanText and CleanLine
// repair it instead.
package safetext

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Replacement stands in for a control character CleanText or CleanLine
// removes from visible text (U+FFFD, the Unicode replacement character).
const Replacement = '\uFFFD'

// CleanText repairs multi-line text so that Text accepts it: NUL is
// dropped (it carries nothing visible), every other control character
// Text refuses becomes Replacement, and invalid UTF-8 (which PostgreSQL
// refuses too) becomes Replacement. Tab, line feed and carriage return stay.
func CleanText(s string) string { return clean(s, false) }

// CleanLine repairs a single-line value so that Line accepts it: like
// CleanText, and line breaks (CR, LF) become spaces, as in a folded
// header line.
func CleanLine(s string) string { return clean(s, true) }

func clean(s string, line bool) string {
	bad := !utf8.ValidString(s)
	if !bad {
		for i := 0; i < len(s); i++ {
			if c := s[i]; c < 0x20 || c == 0x7f || c == 0xc2 {
				bad = true
				break
			}
		}
	}
	if !bad {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range strings.ToValidUTF8(s, string(Replacement)) {
		switch {
		case r == 0:
		case r == '\t':
			b.WriteRune(r)
		case r == '\n' || r == '\r':
			if line {
				b.WriteByte(' ')
			} else {
				b.WriteRune(r)
			}
		case isControl(r):
			b.WriteRune(Replacement)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// CleanLines applies CleanLine to every element of ss in place and
// returns it.
func CleanLines(ss []string) []string {
	for i, s := range ss {
		ss[i] = CleanLine(s)
	}
	return ss
}

// Error is a refusal; it names the first offending character.
type Error struct {
	// Rune is the refused character.
	Rune rune
}

func (e *Error) Error() string {
	switch e.Rune {
	case '\r', '\n':
		return fmt.Sprintf("contains a line break (U+%04X)", e.Rune)
	case ' ':
		return "contains a space"
	case 0:
		return "contains a NUL character (U+0000)"
	}
	return fmt.Sprintf("contains a control character (U+%04X)", e.Rune)
}

func controlError(r rune) error { return &Error{Rune: r} }

// isControl reports the Unicode Cc characters: C0, DEL and C1.
func isControl(r rune) bool { return r < 0x20 || (r >= 0x7f && r <= 0x9f) }

// Text checks multi-line text: no control characters other than tab, line
// feed and carriage return.
func Text(s string) error {
	for _, r := range s {
		if isControl(r) && r != '\t' && r != '\n' && r != '\r' {
			return controlError(r)
		}
	}
	return nil
}

// Line checks a single-line value: no control characters other than tab
// (so no line breaks).
func Line(s string) error {
	for _, r := range s {
		if isControl(r) && r != '\t' {
			return controlError(r)
		}
	}
	return nil
}

// Token checks a credential or identifier: no control characters and no
// spaces or tabs at all.
func Token(s string) error {
	for _, r := range s {
		if isControl(r) {
			return controlError(r)
		}
		if r == ' ' {
			return controlError(r)
		}
	}
	return nil
}

// JSON checks every string (keys included) of a valid JSON document with
// Text. The scan works on the raw bytes, where a control character can
// only appear as an escape or as raw DEL or C1 bytes; only when it finds
// one does it decode the document to name the field.
func JSON(raw []byte) error {
	if !rawHasControl(raw) {
		return nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return fmt.Errorf("malformed JSON: %w", err)
	}
	path, err := walk(v, "")
	if err == nil {
		return nil
	}
	if path == "" {
		return err
	}
	return fmt.Errorf("field %q %w", path, err)
}

// rawHasControl reports whether any string of a valid JSON document holds
// a character Text refuses.
func rawHasControl(b []byte) bool {
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case c == '\\' && i+1 < len(b):
			switch b[i+1] {
			case 'u':
				if i+6 <= len(b) {
					if cp, err := strconv.ParseUint(string(b[i+2:i+6]), 16, 32); err == nil && Text(string(rune(cp))) != nil {
						return true
					}
				}
				i += 5
			case 'b', 'f':
				return true
			default:
				i++
			}
		case c < 0x20 && c != '\t' && c != '\n' && c != '\r':
			return true
		case c == 0x7f:
			return true
		case c == 0xc2 && i+1 < len(b) && b[i+1] >= 0x80 && b[i+1] <= 0x9f:
			return true
		}
	}
	return false
}

// walk returns the path and refusal of the first bad string in v.
func walk(v any, path string) (string, error) {
	switch x := v.(type) {
	case string:
		if err := Text(x); err != nil {
			return path, err
		}
	case []any:
		for i, e := range x {
			if p, err := walk(e, path+"["+strconv.Itoa(i)+"]"); err != nil {
				return p, err
			}
		}
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			p := k
			if path != "" {
				p = path + "." + k
			}
			if err := Text(k); err != nil {
				return path, err
			}
			if p, err := walk(x[k], p); err != nil {
				return p, err
			}
		}
	}
	return "", nil
}

// IsFormat reports the Unicode format characters (category Cf): the
// bidirectional controls (U+200E/F, U+202A–E, U+2066–9), zero-width
// characters, U+FEFF and the like. They are invisible but reorder or hide
// the text around them: "invoice\u202efdp.exe" displays as
// "invoiceexe.pdf".
func IsFormat(r rune) bool { return unicode.Is(unicode.Cf, r) }

// StripFormat removes every format character (IsFormat) from s.
func StripFormat(s string) string {
	if strings.IndexFunc(s, IsFormat) < 0 {
		return s
	}
	return strings.Map(func(r rune) rune {
		if IsFormat(r) {
			return -1
		}
		return r
	}, s)
}

// ShowFormat returns s with every format character replaced by a visible
// escape such as "<U+202E>", so a person reading a sender name or subject
// sees that it is there instead of having it applied.
func ShowFormat(s string) string {
	if strings.IndexFunc(s, IsFormat) < 0 {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if IsFormat(r) {
			fmt.Fprintf(&b, "<U+%04X>", r)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}
