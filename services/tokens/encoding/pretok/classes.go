package pretok

import (
	"fmt"
	"unicode"
	"unicode/utf8"
)

// Class bits of a code point: the Unicode properties the split patterns test.
const (
	letter = 1 << iota // \p{L}
	number             // \p{N}
	space              // \s: White_Space, as in Rust's regex and regexp2
	upper              // [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}] (o200k_base)
	lower              // [\p{Ll}\p{Lm}\p{Lo}\p{M}] (o200k_base)
	mark               // \p{M}
)

// blockBits is the log2 of the code points per block of [Classes].
const blockBits = 8

// Classes answers the class bits of any code point with two array loads: the
// code space is cut into 256-point blocks, and identical blocks (most of
// them: unassigned planes, runs of CJK) are stored once. It holds Go's
// unicode tables widened to Unicode 16.0 with unicodeAdditions, tiktoken's
// version. Immutable; build one with [NewClasses] and share it.
type Classes struct {
	index  [(unicode.MaxRune + 1) >> blockBits]uint16
	blocks [][1 << blockBits]uint8
	ascii  [utf8.RuneSelf]uint8 // blocks[0] up to 0x7F, without a slice to check
}

// NewClasses builds the table (a few milliseconds).
func NewClasses() (*Classes, error) {
	flags := make([]uint8, unicode.MaxRune+1)
	set := func(t *unicode.RangeTable, bit uint8) {
		for _, r := range t.R16 {
			for c := rune(r.Lo); c <= rune(r.Hi); c += rune(r.Stride) {
				flags[c] |= bit
			}
		}
		for _, r := range t.R32 {
			for c := rune(r.Lo); c <= rune(r.Hi); c += rune(r.Stride) {
				flags[c] |= bit
			}
		}
	}
	classes := []struct {
		name string
		t    *unicode.RangeTable
		bits uint8
	}{
		{"L", unicode.L, letter},
		{"N", unicode.N, number},
		{"Lu", unicode.Lu, upper},
		{"Lt", unicode.Lt, upper},
		{"Lm", unicode.Lm, upper | lower},
		{"Lo", unicode.Lo, upper | lower},
		{"Ll", unicode.Ll, lower},
		{"M", unicode.M, upper | lower | mark},
	}
	for _, c := range classes {
		set(c.t, c.bits)
		extra, err := parseAdditions(unicodeAdditions[c.name])
		if err != nil {
			return nil, fmt.Errorf("pretok: additions to %s: %w", c.name, err)
		}
		for _, r := range extra {
			for x := r[0]; x <= r[1]; x++ {
				flags[x] |= c.bits
			}
		}
	}
	set(unicode.White_Space, space)

	t := &Classes{}
	seen := map[[1 << blockBits]uint8]uint16{}
	for b := range t.index {
		var blk [1 << blockBits]uint8
		copy(blk[:], flags[b<<blockBits:])
		i, ok := seen[blk]
		if !ok {
			i = uint16(len(t.blocks))
			t.blocks = append(t.blocks, blk)
			seen[blk] = i
		}
		t.index[b] = i
	}
	copy(t.ascii[:], t.blocks[0][:])
	return t, nil
}

// of returns the class bits of r, a valid code point.
func (t *Classes) of(r rune) uint8 {
	return t.blocks[t.index[r>>blockBits]][r&(1<<blockBits-1)]
}

// at decodes the code point at text[i] (valid UTF-8, i < len(text)) and
// returns its class bits and encoded size.
func (t *Classes) at(text string, i int) (uint8, int) {
	if c := text[i]; c < utf8.RuneSelf {
		return t.ascii[c], 1
	}
	return t.atMultibyte(text, i)
}

// atMultibyte is at for a character of two bytes or more.
func (t *Classes) atMultibyte(text string, i int) (uint8, int) {
	c := text[i]
	// Valid UTF-8 needs no checks: the two- and three-byte forms (all of
	// the BMP: CJK, Cyrillic, Arabic...) are decoded here, the rest by the
	// library. Bounds are still checked, so invalid input cannot panic.
	if c >= 0xE0 && c < 0xF0 && i+2 < len(text) {
		return t.of(rune(c&0x0F)<<12 | rune(text[i+1]&0x3F)<<6 | rune(text[i+2]&0x3F)), 3
	}
	if c >= 0xC0 && c < 0xE0 && i+1 < len(text) {
		return t.of(rune(c&0x1F)<<6 | rune(text[i+1]&0x3F)), 2
	}
	r, n := utf8.DecodeRuneInString(text[i:])
	return t.of(r), n
}

// parseAdditions reads a character-class body of literal characters and
// ranges ("a-zé") as unicode16.go writes them.
func parseAdditions(s string) ([][2]rune, error) {
	rs := []rune(s)
	var out [][2]rune
	for i := 0; i < len(rs); i++ {
		lo, hi := rs[i], rs[i]
		if i+2 < len(rs) && rs[i+1] == '-' {
			hi = rs[i+2]
			i += 2
		}
		if hi < lo || lo == utf8.RuneError {
			return nil, fmt.Errorf("bad range %U-%U", lo, hi)
		}
		out = append(out, [2]rune{lo, hi})
	}
	return out, nil
}

// UnicodeAdditions returns the characters Unicode 16.0 puts in general
// category class (L, Lu, Ll, Lt, Lm, Lo, M, N) that Go's tables, version
// [UnicodeGoVersion], do not, as a character-class body ("\u1c89-\u1c8a...").
func UnicodeAdditions(class string) string { return unicodeAdditions[class] }

// UnicodeGoVersion is the version of Go's unicode tables the additions were
// computed against; with other tables they are wrong.
const UnicodeGoVersion = unicodeGoVersion
