// Package textcut bounds text for storage and display: valid UTF-8, cut at
// a rune boundary.
package textcut

import (
	"strings"
	"unicode/utf8"
)

// Ellipsis marks a cut made by Mark.
const Ellipsis = "…"

// Mark makes s valid UTF-8 and cuts it to at most n bytes at a rune
// boundary, ending a cut with Ellipsis (within the n bytes). With n too
// small for the ellipsis a cut leaves nothing.
func Mark(s string, n int) string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	if len(s) <= n {
		return s
	}
	if n <= len(Ellipsis) {
		return ""
	}
	return s[:boundary(s, n-len(Ellipsis))] + Ellipsis
}

// Plain makes s valid UTF-8 and cuts it to at most n bytes at a rune
// boundary, with no mark.
func Plain(s string, n int) string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	if len(s) <= n {
		return s
	}
	return s[:boundary(s, max(n, 0))]
}

// boundary is the largest rune boundary of s at or below i (i < len(s)).
func boundary(s string, i int) int {
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return i
}
