package artifact

import (
	"bufio"
	"io"
	"regexp"
	"strings"

	"github.com/baagent/baagent/services/toolrunner/truncate"
)

// ReadRequest selects a page of an artifact's lines.
type ReadRequest struct {
	Owner Owner
	ID    string
	// Offset is the 0-based line to start at.
	Offset int64
	// Limit is the number of lines to return (≤ 0 or above
	// truncate.DefaultReadLimit: the default of 2000).
	Limit int
	// Pattern, when set, returns only matching lines; Offset still counts
	// every line, so pages of matches continue where the last one stopped.
	Pattern *regexp.Regexp
	// MaxBytes bounds the page's text (≤ 0: truncate.MaxOutputBytes).
	MaxBytes int
}

// Line is one line of a page.
type Line struct {
	// Number is 1-based.
	Number int64
	// Text is cut at truncate.MaxLineLength characters.
	Text string
}

// Page is a page of an artifact.
type Page struct {
	Lines []Line
	// TotalLines in the artifact.
	TotalLines int64
	// NextOffset is the offset of the next page; -1 at the end.
	NextOffset int64
	// Size of the artifact in bytes.
	Size int64
	// CutByBytes reports that MaxBytes ended the page early.
	CutByBytes bool
}

// Read returns a page of the lines of owner's artifact r.ID. The whole
// artifact is scanned to count its lines, with constant memory.
func (s *Store) Read(r ReadRequest) (Page, error) {
	m, err := s.Stat(r.Owner, r.ID)
	if err != nil {
		return Page{}, err
	}
	f, err := s.open(m)
	if err != nil {
		return Page{}, err
	}
	defer f.Close()
	limit := r.Limit
	if limit <= 0 || limit > truncate.DefaultReadLimit {
		limit = truncate.DefaultReadLimit
	}
	budget := r.MaxBytes
	if budget <= 0 {
		budget = truncate.MaxOutputBytes
	}
	offset := max(r.Offset, 0)

	p := Page{Size: m.Size, NextOffset: -1}
	used := 0
	full := false // the page is complete; keep counting lines only
	br := bufio.NewReaderSize(f, 64<<10)
	var n int64
	for {
		line, err := truncate.ReadLine(br)
		if err == io.EOF {
			break
		}
		if err != nil {
			return Page{}, scrub(err)
		}
		n++
		if full || n <= offset {
			continue
		}
		if r.Pattern != nil && !r.Pattern.Match(line) {
			continue
		}
		text := strings.ToValidUTF8(truncate.Line(string(line)), "\uFFFD")
		if len(p.Lines) == 0 && len(text)+1 > budget {
			text, _ = truncate.Bytes(text, budget-1) // never an empty page
		}
		if used+len(text)+1 > budget {
			p.CutByBytes = true
			full = true
			p.NextOffset = n - 1
			continue
		}
		used += len(text) + 1
		p.Lines = append(p.Lines, Line{Number: n, Text: text})
		if len(p.Lines) == limit {
			full = true
			p.NextOffset = n
		}
	}
	p.TotalLines = n
	if p.NextOffset >= n {
		p.NextOffset = -1 // the page ended exactly at the last line
	}
	return p, nil
}
