package pretok

import "unicode/utf8"

// Safe cut points.
//
// A text can be counted in parts, on several cores or as it streams in, only
// if each part is pre-tokenized as the whole text would be. A position p is a
// safe cut point when, for every text containing the same characters around
// p, two things hold:
//
//  1. no piece of the whole text's pre-tokenization spans p, and
//  2. pre-tokenizing text[:p] alone yields exactly the whole text's pieces
//     before p, and text[p:] alone those after p.
//
// Then, since byte-pair encoding works piece by piece,
// count(text) == count(text[:p]) + count(text[p:]).
//
// Half of (2) is free: none of the three patterns has a look-behind, an
// anchor or \b, so a match starting at p depends on text[p:] only. The other
// half is not: a match before p may look at text[p] (a greedy run stops
// there, a look-ahead (?!\S) tests it, an optional suffix tries it), and at
// the end of text[:p] it sees the end of the text instead. So the character
// b = text[p] must stop every match running up to p in exactly the way the
// end of the text does: b must not be consumable by whatever can follow the
// character a that ends at p.
//
// CanCut accepts three kinds of (a, b), true for o200k_base, cl100k_base and
// the GPT-2 pattern (p50k_base, r50k_base) alike; the split patterns are at
// [O200k], [Cl100k] and [GPT2].
//
// Rule L: a is a letter (\p{L}) and b is neither a letter, a mark (\p{M})
// nor an apostrophe ('). In every pattern a letter is only ever followed,
// inside its piece, by more letters (\p{L}+ in cl100k and GPT-2), letters or
// marks (o200k's [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]* and
// [\p{Ll}\p{Lm}\p{Lo}\p{M}]+, whose union is letters and marks), or by the
// contraction suffix (?i:'s|'t|...) that o200k allows after a letter run
// and that starts with an apostrophe. The optional prefix
// [^\r\n\p{L}\p{N}]? and the optional space of ` ?\p{L}+` come before the
// letters, never after; no other alternative matches a letter (the classes
// [^\s\p{L}\p{N}], \p{N} and \s exclude it). So the piece holding a ends at
// p (1). Every sub-pattern that can consume a is a letter class, after which
// the pattern can only try another letter or mark, or an apostrophe: b, like
// the end of the text, fails all of them, so each match before p is the
// same in text[:p] (2). The apostrophe rule is the contraction hazard:
// "don't" is one o200k piece.
//
// Rule N: a is a number (\p{N}) and b is not. Numbers only occur in the
// number alternatives \p{N}{1,3} (o200k, cl100k) and ` ?\p{N}+` (GPT-2):
// the other classes exclude \p{N}. A run of numbers ends at b, and the
// three-digit groups of \p{N}{1,3} are counted from the start of the run,
// which lies before p. Cutting between two digits is not safe: "1234" is
// "123" "4", but "12" | "34" gives "12" "34".
//
// Rule S: a is not whitespace (\s) and b is the space U+0020. No piece holds
// a non-whitespace character followed by a space: letter and number runs
// stop at it, [^\s\p{L}\p{N}]+ excludes it and its trailers [\r\n]* (cl100k)
// and [\r\n/]* (o200k) do not take a space, the whitespace alternatives hold
// only whitespace, and the optional prefixes (a space or
// [^\r\n\p{L}\p{N}]) are first in their piece. Each match running up to p
// ends with a letter, mark, number or other-class run or a trailer, none of
// which takes a space, as none takes the end of the text. Other whitespace
// than U+0020 is not accepted as b: after punctuation a newline joins the
// piece ("!\n" is one piece through [\r\n]*).
//
// A cut is never made after whitespace. \s*[\r\n]+ and \s+(?!\S) make a
// whitespace piece depend on what follows the whole run: "\n\n" is one
// piece (one token) and "\n" | "\n" two; "a   b" is "a" "  " " b" but
// "a " | "  b" gives "a" " " " " " b". Nor before a letter after
// punctuation: the optional prefix takes it ("(word" is one cl100k piece).
//
// Invalid UTF-8: a and b must be whole, valid characters in the raw bytes.
// Replacing each maximal invalid subsequence by U+FFFD (what the engines do
// first) then commutes with the cut: an invalid subsequence is a lead byte
// followed by continuation bytes, and neither a's first byte nor b's first
// byte is a continuation byte, so no subsequence crosses p.
//
// Special tokens are not considered here: a special token such as
// <|fim_prefix|> contains letter-to-punctuation pairs ("m_", "x|") where
// CanCut says yes; the encoding package refuses cuts inside special-token
// text when special tokens are allowed.
func (s Splitter) CanCut(text string, p int) bool {
	if p <= 0 || p >= len(text) {
		return false
	}
	a, na := utf8.DecodeLastRuneInString(text[:p])
	if a == utf8.RuneError && na <= 1 {
		return false
	}
	fb, nb := s.bClass(text, p)
	if nb == 0 {
		return false
	}
	fa := s.c.of(a)
	switch {
	case text[p] == ' ' && fa&space == 0: // rule S
		return true
	case fa&letter != 0: // rule L
		return fb&(letter|mark) == 0 && text[p] != '\''
	case fa&number != 0: // rule N
		return fb&number == 0
	}
	return false
}

// bClass returns the class bits and size of the valid character at text[p],
// or size 0 when the bytes there are not a whole valid character.
func (s Splitter) bClass(text string, p int) (uint8, int) {
	if c := text[p]; c < utf8.RuneSelf {
		return s.c.ascii[c], 1
	}
	r, n := utf8.DecodeRuneInString(text[p:])
	if r == utf8.RuneError && n <= 1 {
		return 0, 0
	}
	return s.c.of(r), n
}
