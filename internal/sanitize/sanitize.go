// Package sanitize makes text from the logs safe to show: log fields are attacker-controlled.
package sanitize

import (
	"fmt"
	"strings"
	"unicode"
)

// Text makes attacker-controlled text safe for a terminal: control characters (escape
// sequences among them) and invisible format characters are shown as \xXX or \u{…}.
func Text(s string) string {
	clean := true
	for _, r := range s {
		if Unsafe(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case r < 0x80 && Unsafe(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case Unsafe(r):
			fmt.Fprintf(&b, `\u{%x}`, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Unsafe reports whether r is a control or an invisible format character.
func Unsafe(r rune) bool {
	return unicode.IsControl(r) || unicode.Is(unicode.Cf, r)
}
