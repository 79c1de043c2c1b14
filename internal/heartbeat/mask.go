package heartbeat

import (
	"encoding/base64"
	"encoding/hex"
	"slices"
	"strings"

	"github.com/paperclipai/paperclipai/internal/domain"
)

// minMaskLen is the shortest secret masked: shorter values would garble
// the log (and are no credential worth the name).
const minMaskLen = 4

// minFragmentLen is the shortest encoded fragment masked.
const minFragmentLen = 4

// maskSecrets replaces every value of secrets (at least minMaskLen bytes)
// in text with domain.WriteOnlyValue, in the forms a program commonly
// prints it: as is, hex (either case) and base64 (standard and URL
// alphabets, wherever the value starts inside the encoded data).
func maskSecrets(text string, secrets []string) string {
	var forms []string
	for _, v := range secrets {
		if len(v) < minMaskLen {
			continue
		}
		forms = append(forms, v, hex.EncodeToString([]byte(v)), strings.ToUpper(hex.EncodeToString([]byte(v))))
		forms = append(forms, base64Fragments(v)...)
	}
	// Longest first: a value's form may contain a shorter value's.
	slices.SortFunc(forms, func(a, b string) int { return len(b) - len(a) })
	for _, f := range slices.Compact(forms) {
		if f != "" && strings.Contains(text, f) {
			text = strings.ReplaceAll(text, f, domain.WriteOnlyValue)
		}
	}
	return text
}

// base64Fragments returns, for each of the three positions a value can
// start at within a base64-encoded stream (its offset modulo 3), the part
// of the encoding that depends on the value's bytes alone, in the
// standard and URL alphabets. A value printed base64-encoded inside
// anything longer ("KEY=value" | base64) contains one of them.
func base64Fragments(v string) []string {
	var out []string
	bits := 8 * len(v)
	for k := range 3 {
		buf := append(make([]byte, k), v...)
		for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
			s := enc.EncodeToString(buf)
			// Character i encodes bits [6i, 6i+6) of buf; keep those
			// lying within the value's bits [8k, 8k+8len).
			first := (8*k + 5) / 6
			last := (8*k + bits) / 6 // exclusive
			if last > len(s) {
				last = len(s)
			}
			if last-first >= minFragmentLen {
				out = append(out, s[first:last])
			}
		}
	}
	return out
}
