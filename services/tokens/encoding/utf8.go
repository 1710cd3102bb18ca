package encoding

import (
	"strings"
	"unicode/utf8"
)

// replaceInvalid replaces each maximal invalid subsequence of s with one
// U+FFFD, as Python's bytes.decode("utf-8", errors="replace") does (Unicode's
// "substitution of maximal subparts"); Go's own decoding would emit one U+FFFD
// per byte of a truncated sequence.
func replaceInvalid(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 8)
	for len(s) > 0 {
		r, n := utf8.DecodeRuneInString(s)
		if r == utf8.RuneError && n == 1 {
			b.WriteRune(utf8.RuneError)
			n = maximalSubpart(s)
		} else {
			b.WriteString(s[:n])
		}
		s = s[n:]
	}
	return b.String()
}

// maximalSubpart returns the length of the invalid sequence starting s: the
// longest prefix that starts a well-formed sequence, at least one byte.
func maximalSubpart(s string) int {
	need, lo, hi := 0, byte(0x80), byte(0xBF)
	switch c := s[0]; {
	case c >= 0xC2 && c <= 0xDF:
		need = 1
	case c == 0xE0:
		need, lo = 2, 0xA0
	case c >= 0xE1 && c <= 0xEC, c == 0xEE, c == 0xEF:
		need = 2
	case c == 0xED:
		need, hi = 2, 0x9F
	case c == 0xF0:
		need, lo = 3, 0x90
	case c >= 0xF1 && c <= 0xF3:
		need = 3
	case c == 0xF4:
		need, hi = 3, 0x8F
	default:
		return 1
	}
	i := 1
	for ; i <= need && i < len(s); i++ {
		c := s[i]
		if i == 1 && (c < lo || c > hi) || i > 1 && (c < 0x80 || c > 0xBF) {
			break
		}
	}
	return i
}

// ToValidUTF8 returns s with each maximal invalid subsequence replaced by
// U+FFFD, as tiktoken's decode (bytes.decode errors="replace") does.
func ToValidUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return replaceInvalid(s)
}
