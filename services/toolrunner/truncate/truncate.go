// Package truncate cuts tool output to the limits of seed 004 §7.2.6: at
// most 50 KiB of output, lines of at most 2000 characters and pages of 2000
// lines, always at UTF-8 character boundaries, with the seed's hint strings.
package truncate

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Limits of seed 004 §7.2.6.
const (
	// MaxOutputBytes bounds one observation (50 KiB).
	MaxOutputBytes = 50 * 1024
	// MaxLineLength bounds one line, in characters.
	MaxLineLength = 2000
	// DefaultReadLimit is the default (and maximum) page of lines.
	DefaultReadLimit = 2000
	// lineEllipsis marks a line cut at MaxLineLength.
	lineEllipsis = "..."
)

// Bytes returns the longest prefix of s of at most max bytes that does not
// split a UTF-8 sequence, and how many bytes were cut. An invalid sequence at
// the cut is dropped rather than kept half.
func Bytes(s string, max int) (string, int) {
	if max < 0 {
		max = 0
	}
	if len(s) <= max {
		return s, 0
	}
	cut := max
	// Step back over continuation bytes to the start of the rune that
	// straddles the limit, then keep that rune only if it fits whole.
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut], len(s) - cut
}

// Line cuts a line longer than MaxLineLength characters and marks it with
// "...".
func Line(line string) string {
	return LineTo(line, MaxLineLength)
}

// LineTo cuts line to at most max characters (runes) and marks a cut with
// "...".
func LineTo(line string, max int) string {
	if len(line) <= max { // fast path: bytes ≥ runes
		return line
	}
	n := 0
	for i := range line {
		if n == max {
			return line[:i] + lineEllipsis
		}
		n++
	}
	return line
}

// Page is the result of [Lines].
type Page struct {
	// Text is the numbered lines plus the hint.
	Text string
	// Shown is how many lines were included.
	Shown int
	// Next is the 0-based offset of the first line not shown, or -1 when the
	// page reached the end.
	Next int
	// Total is the number of lines.
	Total int
	// CutByBytes reports that the byte budget ended the page.
	CutByBytes bool
}

// Lines formats lines[offset:offset+limit] with 1-based line numbers
// (`%6d\t`), each line cut at MaxLineLength, stopping before the output
// exceeds maxBytes, and appends one of the seed's hints:
//
//	(Output truncated at 51200 bytes. Use 'offset' parameter to read beyond line N)
//	(File has more lines. Use 'offset' parameter to read beyond line N)
//	(End of file - total N lines)
//
// A limit ≤ 0 or above DefaultReadLimit uses DefaultReadLimit; an offset
// past the end yields only the end hint.
func Lines(lines []string, offset, limit, maxBytes int) Page {
	if limit <= 0 || limit > DefaultReadLimit {
		limit = DefaultReadLimit
	}
	if offset < 0 {
		offset = 0
	}
	if maxBytes <= 0 {
		maxBytes = MaxOutputBytes
	}
	var b strings.Builder
	p := Page{Total: len(lines), Next: -1}
	end := min(len(lines), offset+limit)
	for i := offset; i < end; i++ {
		line := fmt.Sprintf("%6d\t%s\n", i+1, Line(strings.TrimSuffix(lines[i], "\r")))
		if b.Len()+len(line) > maxBytes {
			p.CutByBytes = true
			break
		}
		b.WriteString(line)
		p.Shown++
	}
	last := offset + p.Shown // 1-based number of the last line shown
	switch {
	case p.CutByBytes:
		p.Next = last
		fmt.Fprintf(&b, "\n(Output truncated at %d bytes. Use 'offset' parameter to read beyond line %d)", maxBytes, last)
	case last < len(lines):
		p.Next = last
		fmt.Fprintf(&b, "\n(File has more lines. Use 'offset' parameter to read beyond line %d)", last)
	default:
		fmt.Fprintf(&b, "\n(End of file - total %d lines)", len(lines))
	}
	p.Text = b.String()
	return p
}

// SplitLines splits text into lines without their terminators; a final
// newline does not start an extra empty line, and empty text has no lines.
func SplitLines(text string) []string {
	if text == "" {
		return nil
	}
	text = strings.TrimSuffix(text, "\n")
	return strings.Split(text, "\n")
}
