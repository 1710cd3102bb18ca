// Package pretok is tiktoken's pre-tokenizer without a regular-expression
// engine: for each encoding, a hand-written matcher that cuts text into
// exactly the pieces its split pattern (tiktoken_ext/openai_public.py)
// matches, with the leftmost-first, backtracking semantics of the Rust
// fancy-regex engine tiktoken uses. Each matcher is linear in the text.
//
// Character classes follow Unicode 16.0, tiktoken's version: Go's tables
// (see [UnicodeGoVersion]) widened with the generated unicode16.go.
package pretok

// Pattern names one of the split patterns.
type Pattern uint8

// The split patterns.
const (
	// O200k is o200k_base's pattern:
	//	[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?
	//	|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?
	//	|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
	O200k Pattern = iota + 1
	// Cl100k is cl100k_base's pattern:
	//	(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}
	//	| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
	Cl100k
	// GPT2 is the pattern of p50k_base and r50k_base:
	//	's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
	GPT2
)

// Splitter cuts text into the pieces of one pattern. The zero value is not
// usable; build one with [New]. Safe for concurrent use.
type Splitter struct {
	c *Classes
	p Pattern
}

// New returns the splitter of pattern p over the character classes c.
func New(c *Classes, p Pattern) Splitter { return Splitter{c: c, p: p} }

// Next returns the end of the piece that starts at text[i]. text must be
// valid UTF-8 and i < len(text) the start of a character; the result is
// greater than i. Every character belongs to some piece: iterating from 0
// until len(text) yields the pattern's matches, in order, covering text.
func (s Splitter) Next(text string, i int) int {
	switch s.p {
	case O200k:
		return s.o200k(text, i)
	case Cl100k:
		return s.cl100k(text, i)
	default:
		return s.gpt2(text, i)
	}
}

func isCRLF(c byte) bool { return c == '\r' || c == '\n' }

// other is the class [^\s\p{L}\p{N}]: no class bit among these.
const notOther = space | letter | number

// cl100k matches at i; the alternatives are tried in the pattern's order.
func (s Splitter) cl100k(text string, i int) int {
	c0 := text[i]
	// (?i:'s|'t|'re|'ve|'m|'ll|'d)
	if c0 == '\'' {
		if n := contraction(text, i+1, true); n > 0 {
			return i + 1 + n
		}
	}
	f0, n0 := s.c.at(text, i)
	// [^\r\n\p{L}\p{N}]?\p{L}+
	if f0&letter != 0 {
		return s.run(text, i+n0, letter)
	}
	if f0&number == 0 && !isCRLF(c0) && i+n0 < len(text) {
		if f1, n1 := s.c.at(text, i+n0); f1&letter != 0 {
			return s.run(text, i+n0+n1, letter)
		}
	}
	// \p{N}{1,3}
	if f0&number != 0 {
		return s.digits3(text, i+n0)
	}
	// ' ?[^\s\p{L}\p{N}]+[\r\n]*': the space is the only optional prefix
	// that can lead anywhere, since a space is not in the class.
	if j := s.others(text, i, c0); j > i {
		for j < len(text) && isCRLF(text[j]) {
			j++
		}
		return j
	}
	return s.whitespace(text, i, true)
}

// o200k matches at i; the alternatives are tried in the pattern's order,
// each with its optional leading character first taken, then not.
func (s Splitter) o200k(text string, i int) int {
	c0 := text[i]
	f0, n0 := s.c.at(text, i)
	// [^\r\n\p{L}\p{N}]? can take text[i]. When it can, the alternative
	// without it can only match from a mark, the one character both in that
	// class and in the letter classes.
	prefix := f0&(letter|number) == 0 && !isCRLF(c0) && i+n0 < len(text)
	self := f0&(letter|mark) != 0
	if prefix {
		if e := s.caseRun(text, i+n0); e >= 0 {
			return e
		}
	}
	if self {
		if e := s.caseRun(text, i); e >= 0 {
			return e
		}
	}
	if prefix {
		if e := s.upperRun(text, i+n0); e >= 0 {
			return e
		}
	}
	if self {
		if e := s.upperRun(text, i); e >= 0 {
			return e
		}
	}
	// \p{N}{1,3}
	if f0&number != 0 {
		return s.digits3(text, i+n0)
	}
	// ' ?[^\s\p{L}\p{N}]+[\r\n/]*'
	if j := s.others(text, i, c0); j > i {
		for j < len(text) && (isCRLF(text[j]) || text[j] == '/') {
			j++
		}
		return j
	}
	return s.whitespace(text, i, true)
}

// caseRun matches [Lu Lt Lm Lo M]*[Ll Lm Lo M]+ and the optional contraction
// at p, returning the end or -1. The first run is greedy and gives back
// characters until the second can match, so with no lower-class character
// right after it, the match ends after the last lower-class character inside
// it.
func (s Splitter) caseRun(text string, p int) int {
	u, lastLower := p, -1
	for u < len(text) {
		var f uint8
		n := 1
		if c := text[u]; c < 0x80 {
			f = s.c.ascii[c]
		} else if c >= 0xE0 && c < 0xF0 && u+2 < len(text) { // CJK: inline
			r := rune(c&0x0F)<<12 | rune(text[u+1]&0x3F)<<6 | rune(text[u+2]&0x3F)
			f, n = s.c.blocks[s.c.index[r>>blockBits]][r&(1<<blockBits-1)], 3
		} else {
			f, n = s.c.atMultibyte(text, u)
		}
		if f&upper == 0 {
			break
		}
		u += n
		if f&lower != 0 {
			lastLower = u
		}
	}
	if u < len(text) {
		if f, n := s.c.at(text, u); f&lower != 0 {
			return s.suffix(text, s.run(text, u+n, lower))
		}
	}
	if lastLower < 0 {
		return -1
	}
	return s.suffix(text, lastLower)
}

// upperRun matches [Lu Lt Lm Lo M]+[Ll Lm Lo M]* and the optional contraction
// at p, returning the end or -1.
func (s Splitter) upperRun(text string, p int) int {
	u := s.run(text, p, upper)
	if u == p {
		return -1
	}
	return s.suffix(text, s.run(text, u, lower))
}

// suffix extends a letter run ending at e by o200k's optional
// (?i:'s|'t|'re|'ve|'m|'ll|'d).
func (s Splitter) suffix(text string, e int) int {
	if e < len(text) && text[e] == '\'' {
		if n := contraction(text, e+1, true); n > 0 {
			return e + 1 + n
		}
	}
	return e
}

// gpt2 matches at i for p50k_base and r50k_base.
func (s Splitter) gpt2(text string, i int) int {
	c0 := text[i]
	// 's|'t|'re|'ve|'m|'ll|'d
	if c0 == '\'' {
		if n := contraction(text, i+1, false); n > 0 {
			return i + 1 + n
		}
	}
	// ' ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+': the three classes are
	// disjoint and exclude the space, so the class of the first character
	// after the optional space decides.
	j := i
	if c0 == ' ' && i+1 < len(text) {
		j = i + 1
	}
	f, n := s.c.at(text, j)
	switch {
	case f&letter != 0:
		return s.run(text, j+n, letter)
	case f&number != 0:
		return s.run(text, j+n, number)
	case f&notOther == 0:
		return s.run(text, j+n, other)
	}
	return s.whitespace(text, i, false)
}

// other selects, in run, the characters with none of the bits notOther.
const other = 0

// run returns the end of the run starting at j of characters having a bit of
// class (or, for class other, having none of notOther). The hot loop of the
// pre-tokenizer: ASCII and three-byte characters (CJK) are classified
// inline.
func (s Splitter) run(text string, j int, class uint8) int {
	stopIf, stopWhen := class, uint8(0) // stop when f&stopIf == stopWhen
	if class == other {
		stopIf = notOther
	}
	blocks, index := s.c.blocks, &s.c.index
	for j < len(text) {
		c := text[j]
		var f uint8
		n := 1
		switch {
		case c < 0x80:
			f = s.c.ascii[c]
		case c >= 0xE0 && c < 0xF0 && j+2 < len(text):
			r := rune(c&0x0F)<<12 | rune(text[j+1]&0x3F)<<6 | rune(text[j+2]&0x3F)
			f, n = blocks[index[r>>blockBits]][r&(1<<blockBits-1)], 3
		default:
			f, n = s.c.at(text, j)
		}
		if class == other {
			if f&stopIf != 0 {
				return j
			}
		} else if f&stopIf == stopWhen {
			return j
		}
		j += n
	}
	return j
}

// digits3 returns the end of \p{N}{1,3} whose first character ends at j.
func (s Splitter) digits3(text string, j int) int {
	for k := 0; k < 2 && j < len(text); k++ {
		f, n := s.c.at(text, j)
		if f&number == 0 {
			break
		}
		j += n
	}
	return j
}

// others matches ' ?[^\s\p{L}\p{N}]+' at i and returns its end, or i.
func (s Splitter) others(text string, i int, c0 byte) int {
	j := i
	if c0 == ' ' {
		j++
	}
	if j >= len(text) {
		return i
	}
	f, n := s.c.at(text, j)
	if f&notOther != 0 {
		return i
	}
	return s.run(text, j+n, other)
}

// whitespace matches the whitespace alternatives at i, where the character
// is whitespace: \s*[\r\n]+ when crlf (the run up to its last CR or LF),
// then \s+(?!\S) (the run, less its last character unless it ends the text),
// then \s+ (one character: the run was a single one followed by non-space).
func (s Splitter) whitespace(text string, i int, crlf bool) int {
	j, last, lastNL := i, i, -1
	for j < len(text) {
		f, n := s.c.at(text, j)
		if f&space == 0 {
			break
		}
		if isCRLF(text[j]) {
			lastNL = j
		}
		last = j
		j += n
	}
	switch {
	case j == i: // not whitespace: unreachable from the matchers, but never loop
		_, n := s.c.at(text, i)
		return i + n
	case crlf && lastNL >= 0:
		return lastNL + 1
	case j == len(text) || last == i:
		return j
	default:
		return last
	}
}

// contraction returns the length of s|t|re|ve|m|ll|d at text[j] (after an
// apostrophe), or 0. With fold the match is case-insensitive under Unicode
// simple case folding, as Rust's regex (?i) is: the only non-ASCII character
// that folds to one of these letters is U+017F LATIN SMALL LETTER LONG S.
func contraction(text string, j int, fold bool) int {
	if j >= len(text) {
		return 0
	}
	lower := func(c byte) byte {
		if fold && 'A' <= c && c <= 'Z' {
			return c + 'a' - 'A'
		}
		return c
	}
	switch lower(text[j]) {
	case 's', 't', 'm', 'd':
		return 1
	case 'r', 'v':
		if j+1 < len(text) && lower(text[j+1]) == 'e' {
			return 2
		}
	case 'l':
		if j+1 < len(text) && lower(text[j+1]) == 'l' {
			return 2
		}
	case 0xC5: // U+017F is C5 BF
		if fold && j+1 < len(text) && text[j+1] == 0xBF {
			return 2
		}
	}
	return 0
}
