// Package truncate cuts tool output (docs/concepts/tools.md#truncation): at
// most 50 KiB of output, lines of at most 2000 characters and pages of 2000
// lines, always at UTF-8 character boundaries, with hints on how to read on.
package truncate

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// Limits of tool output (docs/concepts/tools.md#truncation).
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
	// Total is the number of lines, or -1 when lines follow the window.
	Total int
	// CutByBytes reports that the byte budget ended the page.
	CutByBytes bool
}

// Lines formats lines[offset:offset+limit] of a text held in memory; see
// [Format]. A limit ≤ 0 or above DefaultReadLimit uses DefaultReadLimit; an
// offset past the end yields only the end hint.
func Lines(lines []string, offset, limit, maxBytes int) Page {
	if limit <= 0 || limit > DefaultReadLimit {
		limit = DefaultReadLimit
	}
	offset = min(max(offset, 0), len(lines))
	end := offset + min(limit, len(lines)-offset)
	total := len(lines)
	if end < len(lines) {
		total = -1
	}
	return Format(lines[offset:end], offset, total, maxBytes)
}

// Format renders window, the lines of a file starting at the 0-based line
// first, with 1-based line numbers (`%6d\t`), each line cut at
// MaxLineLength, stopping before the output exceeds maxBytes (≤ 0:
// MaxOutputBytes), and appends one of these hints:
//
//	(Output truncated at 51200 bytes. Use 'offset' parameter to read beyond line N)
//	(File has more lines. Use 'offset' parameter to read beyond line N)
//	(End of file - total N lines)
//
// total is the number of lines in the file when window reaches its end, or
// -1 when more lines follow the window.
func Format(window []string, first, total, maxBytes int) Page {
	if maxBytes <= 0 {
		maxBytes = MaxOutputBytes
	}
	var b strings.Builder
	p := Page{Total: total, Next: -1}
	for i, l := range window {
		line := fmt.Sprintf("%6d\t%s\n", first+i+1, Line(strings.TrimSuffix(l, "\r")))
		if b.Len()+len(line) > maxBytes {
			p.CutByBytes = true
			if p.Shown == 0 { // never an empty page: show what fits of the line
				line, _ = Bytes(line, maxBytes)
				b.WriteString(line)
				p.Shown++
			}
			break
		}
		b.WriteString(line)
		p.Shown++
	}
	last := first + p.Shown // 1-based number of the last line shown
	switch {
	case p.CutByBytes:
		p.Next = last
		fmt.Fprintf(&b, "\n(Output truncated at %d bytes. Use 'offset' parameter to read beyond line %d)", maxBytes, last)
	case total < 0:
		p.Next = last
		fmt.Fprintf(&b, "\n(File has more lines. Use 'offset' parameter to read beyond line %d)", last)
	default:
		fmt.Fprintf(&b, "\n(End of file - total %d lines)", total)
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

// maxLineBytes bounds the bytes [ReadLine] keeps of one line: enough for
// MaxLineLength characters of up to 4 bytes each.
const maxLineBytes = MaxLineLength*4 + 4

// ReadLine returns the next line of br without its terminator (\n or
// \r\n), keeping at most enough bytes for MaxLineLength characters and
// skipping the rest, so that one huge line cannot exhaust memory. It returns
// io.EOF when no lines are left.
func ReadLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if len(line) < maxLineBytes {
			line = append(line, chunk[:min(len(chunk), maxLineBytes-len(line))]...)
		}
		switch {
		case err == nil:
			return trimEOL(line), nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err == io.EOF:
			if len(line) == 0 {
				return nil, io.EOF
			}
			return trimEOL(line), nil
		default:
			return nil, err
		}
	}
}

func trimEOL(b []byte) []byte {
	if n := len(b); n > 0 && b[n-1] == '\n' {
		b = b[:n-1]
	}
	if n := len(b); n > 0 && b[n-1] == '\r' {
		b = b[:n-1]
	}
	return b
}
