package builtin

import (
	"path"
	"strings"
	"unicode/utf8"

	"github.com/baagent/baagent/services/toolrunner/tool"
)

// Limits of a glob pattern. Matching costs at most about
// depth × segments × (segment pattern × name segment) steps, so these and
// maxWalkDepth keep one match well under a millisecond whatever the input.
const (
	maxGlobBytes    = 1024
	maxGlobSegments = 128
	// maxGlobStars bounds `**` segments (as before; matching no longer
	// depends on it).
	maxGlobStars = 4
)

// glob is a compiled glob pattern: `*`, `?`, `[seq]`, `[!seq]` within a
// path segment and `**` for any number of segments. The segments are
// grouped around the `**`: head must match the first segments of a path,
// tail the last, and each of mids somewhere in between, in order.
//
// Matching is greedy, like the classic wildcard matcher with one
// backtrack point per star: every group has a fixed number of segments,
// so placing each middle group at its leftmost fit never loses a match,
// and no split of the path among the `**` is tried twice. A segment
// pattern is matched the same way within the segment (path.Match's
// algorithm, compiled once). Total cost: O(path segments × pattern
// segments) segment matches, each O(name segment × segment pattern).
type glob struct {
	head, tail []globSeg
	mids       [][]globSeg
	stars      int
}

// globSeg is one compiled segment pattern: chunks of single-character
// elements, each chunk but the first preceded by a star.
type globSeg struct {
	chunks []globChunk
	minLen int    // bytes a matching name needs: every element takes one or more
	lit    string // the whole pattern when it has no special characters
	isLit  bool
}

type globChunk struct {
	star   bool
	elems  []globElem
	lit    string // the chunk's bytes when every element is a literal
	allLit bool
}

const (
	elemLit   = iota // one byte
	elemAny          // `?`: one character
	elemClass        // `[...]`: one character in (or, negated, not in) ranges
)

type globElem struct {
	kind   uint8
	lit    byte
	neg    bool
	ranges []rune // lo, hi pairs
}

// compileGlob checks and compiles a glob pattern.
func compileGlob(pattern string) (*glob, *tool.Error) {
	if pattern == "" {
		return nil, invalid("INVALID_GLOB", "pattern is required")
	}
	if len(pattern) > maxGlobBytes {
		return nil, invalid("INVALID_GLOB", "the pattern is %d bytes; the limit is %d", len(pattern), maxGlobBytes)
	}
	if strings.ContainsRune(pattern, '\\') || path.IsAbs(pattern) {
		return nil, invalid("INVALID_GLOB", "pattern %q must be relative to the workspace and use '/'", pattern)
	}
	segs := strings.Split(path.Clean(pattern), "/")
	if len(segs) > maxGlobSegments {
		return nil, invalid("INVALID_GLOB", "the pattern has %d segments; the limit is %d", len(segs), maxGlobSegments)
	}
	g := &glob{}
	cur := &g.head
	for _, s := range segs {
		if s == ".." {
			return nil, outside(pattern)
		}
		if s == "**" {
			g.stars++
			if g.stars > 1 {
				g.mids = append(g.mids, *cur)
			}
			cur = &g.tail
			g.tail = nil
			continue
		}
		s = strings.ReplaceAll(s, "[!", "[^")
		if _, err := path.Match(s, ""); err != nil {
			return nil, invalid("INVALID_GLOB", "pattern %q: %v", pattern, err)
		}
		*cur = append(*cur, compileSegment(s))
	}
	if g.stars > maxGlobStars {
		return nil, invalid("INVALID_GLOB", "pattern %q has more than %d '**' segments", pattern, maxGlobStars)
	}
	return g, nil
}

// compileSegment compiles a segment pattern that path.Match accepts
// (backslashes are refused before).
func compileSegment(s string) globSeg {
	seg := globSeg{}
	if !strings.ContainsAny(s, "*?[") {
		return globSeg{lit: s, isLit: true, minLen: len(s)}
	}
	for len(s) > 0 {
		var c globChunk
		for len(s) > 0 && s[0] == '*' {
			c.star = true
			s = s[1:]
		}
		c.allLit = true
		var lit []byte
		for len(s) > 0 && s[0] != '*' {
			switch s[0] {
			case '?':
				c.elems = append(c.elems, globElem{kind: elemAny})
				c.allLit = false
				s = s[1:]
			case '[':
				var e globElem
				e, s = compileClass(s[1:])
				c.elems = append(c.elems, e)
				c.allLit = false
			default:
				c.elems = append(c.elems, globElem{kind: elemLit, lit: s[0]})
				lit = append(lit, s[0])
				s = s[1:]
			}
		}
		if c.allLit {
			c.lit = string(lit)
		}
		seg.minLen += len(c.elems)
		seg.chunks = append(seg.chunks, c)
	}
	return seg
}

// compileClass parses a character class after its `[` (valid, as
// path.Match checked) and returns the rest of the pattern.
func compileClass(s string) (globElem, string) {
	e := globElem{kind: elemClass}
	if len(s) > 0 && s[0] == '^' {
		e.neg = true
		s = s[1:]
	}
	for n := 0; ; n++ {
		if len(s) > 0 && s[0] == ']' && n > 0 {
			return e, s[1:]
		}
		lo, w := utf8.DecodeRuneInString(s)
		s = s[w:]
		hi := lo
		if len(s) > 0 && s[0] == '-' {
			hi, w = utf8.DecodeRuneInString(s[1:])
			s = s[1+w:]
		}
		e.ranges = append(e.ranges, lo, hi)
	}
}

// match reports whether a slash path, split into segments, matches.
func (g *glob) match(name []string) bool {
	if g.stars == 0 {
		return len(name) == len(g.head) && matchSegs(g.head, name)
	}
	if len(name) < len(g.head)+len(g.tail) {
		return false
	}
	end := len(name) - len(g.tail)
	if !matchSegs(g.head, name) || !matchSegs(g.tail, name[end:]) {
		return false
	}
	pos := len(g.head)
	for _, m := range g.mids {
		found := false
		for j := pos; j+len(m) <= end; j++ {
			if matchSegs(m, name[j:]) {
				pos, found = j+len(m), true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// mayContain reports whether a directory (its path split into segments)
// can hold a match, so that walking skips the ones that cannot.
func (g *glob) mayContain(dir []string) bool {
	if g.stars == 0 && len(dir) >= len(g.head) {
		return false
	}
	n := min(len(dir), len(g.head))
	return matchSegs(g.head[:n], dir)
}

// matchSegs matches the segment patterns against the first len(segs)
// names.
func matchSegs(segs []globSeg, name []string) bool {
	for i := range segs {
		if !segs[i].match(name[i]) {
			return false
		}
	}
	return true
}

// match is path.Match for one segment: each chunk is placed at the
// leftmost position where it fits (the last one where it ends the name),
// without backtracking into earlier chunks.
func (s *globSeg) match(name string) bool {
	if s.isLit {
		return name == s.lit
	}
	if len(name) < s.minLen {
		return false
	}
	for i := range s.chunks {
		c := &s.chunks[i]
		last := i == len(s.chunks)-1
		if c.star && len(c.elems) == 0 {
			return true // a trailing star takes the rest
		}
		if last && c.star && c.allLit {
			return strings.HasSuffix(name, c.lit)
		}
		if rest, ok := c.matchPrefix(name); ok && (!last || rest == "") {
			name = rest
			continue
		}
		if !c.star {
			return false
		}
		found := false
		for j := 1; j <= len(name); j++ { // the star takes j bytes
			rest, ok := c.matchPrefix(name[j:])
			if ok && (!last || rest == "") {
				name, found = rest, true
				break
			}
		}
		if !found {
			return false
		}
	}
	return name == ""
}

// matchPrefix matches the chunk's elements at the start of s and returns
// the rest.
func (c *globChunk) matchPrefix(s string) (string, bool) {
	if c.allLit {
		if strings.HasPrefix(s, c.lit) {
			return s[len(c.lit):], true
		}
		return "", false
	}
	for i := range c.elems {
		if s == "" {
			return "", false
		}
		e := &c.elems[i]
		switch e.kind {
		case elemLit:
			if s[0] != e.lit {
				return "", false
			}
			s = s[1:]
		case elemAny:
			_, w := utf8.DecodeRuneInString(s)
			s = s[w:]
		case elemClass:
			r, w := utf8.DecodeRuneInString(s)
			in := false
			for k := 0; k < len(e.ranges); k += 2 {
				if e.ranges[k] <= r && r <= e.ranges[k+1] {
					in = true
					break
				}
			}
			if in == e.neg {
				return "", false
			}
			s = s[w:]
		}
	}
	return s, true
}
