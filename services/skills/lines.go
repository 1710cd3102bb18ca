package skills

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Line paging of resources, as the toolrunner's file_read shows a workspace
// file (docs/concepts/tools.md#truncation): numbered lines (`%6d\t`), lines
// cut at 2,000 characters, pages of at most 2,000 lines and 50 KiB, always
// at character boundaries, ending with a hint on how to read on. The skill
// service cannot import the toolrunner, so the rule is restated here with
// the same limits and hint strings.
const (
	// MaxPageBytes bounds one page of lines (50 KiB).
	MaxPageBytes = 50 * 1024
	// MaxLineChars bounds one line, in characters; longer lines end in "...".
	MaxLineChars = 2000
	// MaxPageLines is the default and maximum of line_limit.
	MaxPageLines = 2000
)

// linePage is one page of numbered lines.
type linePage struct {
	text string
	// next is the 0-based line to read next, or -1 at the end.
	next  int64
	total int64
}

// splitLines splits text into lines without their terminators; a final
// newline does not start an extra empty line.
func splitLines(text string) []string {
	if text == "" {
		return nil
	}
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSuffix(l, "\r")
	}
	return lines
}

// formatLines renders lines[offset:offset+limit] (limit ≤ 0: MaxPageLines)
// within MaxPageBytes, with 1-based line numbers and one of the hints:
//
//	(Output truncated at 51200 bytes. Use 'offset' parameter to read beyond line N)
//	(File has more lines. Use 'offset' parameter to read beyond line N)
//	(End of file - total N lines)
func formatLines(lines []string, offset int64, limit int) linePage {
	if limit <= 0 || limit > MaxPageLines {
		limit = MaxPageLines
	}
	total := int64(len(lines))
	first := min(max(offset, 0), total)
	end := min(first+int64(limit), total)
	var b strings.Builder
	p := linePage{next: -1, total: total}
	shown, cut := int64(0), false
	for i := first; i < end; i++ {
		line := fmt.Sprintf("%6d\t%s\n", i+1, cutLine(lines[i]))
		if b.Len()+len(line) > MaxPageBytes {
			cut = true
			if shown == 0 { // never an empty page: what fits of the line
				b.WriteString(cutBytes(line, MaxPageBytes))
				shown++
			}
			break
		}
		b.WriteString(line)
		shown++
	}
	last := first + shown
	switch {
	case cut:
		p.next = last
		fmt.Fprintf(&b, "\n(Output truncated at %d bytes. Use 'offset' parameter to read beyond line %d)", MaxPageBytes, last)
	case last < total:
		p.next = last
		fmt.Fprintf(&b, "\n(File has more lines. Use 'offset' parameter to read beyond line %d)", last)
	default:
		fmt.Fprintf(&b, "\n(End of file - total %d lines)", total)
	}
	p.text = b.String()
	return p
}

// cutLine cuts a line longer than MaxLineChars characters and marks it.
func cutLine(line string) string {
	if len(line) <= MaxLineChars {
		return line
	}
	n := 0
	for i := range line {
		if n == MaxLineChars {
			return line[:i] + "..."
		}
		n++
	}
	return line
}

// cutBytes returns the longest prefix of s of at most max bytes that does
// not split a character.
func cutBytes(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}
