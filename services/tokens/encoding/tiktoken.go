package encoding

import (
	"fmt"
	"unicode/utf8"

	"github.com/dlclark/regexp2/v2"
	"github.com/tiktoken-go/tokenizer"
)

// tiktokenEncoder is tiktoken's CoreBPE in Go: special tokens found first (only
// when allowed), then each ordinary stretch split by the encoding's regular
// expression, then each piece merged by byte-pair encoding.
//
// The vocabularies and the decoder come from github.com/tiktoken-go/tokenizer,
// a pure-Go port with the vocabularies compiled in. Its splitter is not used
// (see compilePattern), nor its special-token handling, which it lacks: it
// always encodes `<|endoftext|>` as text and cannot decode a special id.
type tiktokenEncoder struct {
	name     string
	split    *regexp2.Regexp // safe for concurrent use
	ranks    map[string]uint // read-only
	dec      tokenizer.Codec // ErrorModeNone: Decode returns the exact bytes
	specials specials
}

func newTiktoken(name string) (*tiktokenEncoder, error) {
	dec, err := tokenizer.Get(tokenizer.Encoding(name))
	if err != nil {
		return nil, fmt.Errorf("encoding: engine lacks %s: %w", name, err)
	}
	dec.SetErrorMode(tokenizer.ErrorModeNone) // set before sharing: not safe to change later
	ranks, err := ranksOf(dec)
	if err != nil {
		return nil, err
	}
	return &tiktokenEncoder{name: name, split: compilePattern(name), ranks: ranks, dec: dec, specials: newSpecials(name)}, nil
}

func (t *tiktokenEncoder) Name() string { return t.name }

func (t *tiktokenEncoder) Encode(text string, allowSpecial bool) ([]uint32, error) {
	ids := make([]uint32, 0, len(text)/3+1)
	err := t.each(text, allowSpecial, func(piece string) {
		ids = bpe(t.ranks, piece, ids)
	}, func(id uint32) { ids = append(ids, id) })
	if err != nil {
		return nil, err
	}
	return ids, nil
}

func (t *tiktokenEncoder) Count(text string, allowSpecial bool) (int, error) {
	n := 0
	var scratch []uint32
	err := t.each(text, allowSpecial, func(piece string) {
		if _, ok := t.ranks[piece]; ok { // most pieces of real text are one token
			n++
			return
		}
		scratch = bpe(t.ranks, piece, scratch[:0])
		n += len(scratch)
	}, func(uint32) { n++ })
	return n, err
}

// each calls piece for each pre-tokenizer piece of text and special for each
// special token, in order. Special tokens are looked for only when
// allowSpecial is set; each stretch between them is split on its own, as in
// tiktoken's CoreBPE._encode_native.
func (t *tiktokenEncoder) each(text string, allowSpecial bool, piece func(string), special func(uint32)) error {
	if !utf8.ValidString(text) {
		text = replaceInvalid(text)
	}
	for allowSpecial {
		at, length, id := t.specials.next(text)
		if at < 0 {
			break
		}
		if err := t.pieces(text[:at], piece); err != nil {
			return err
		}
		special(id)
		text = text[at+length:]
	}
	return t.pieces(text, piece)
}

// pieces calls yield for each match of the pre-tokenizer in text, which must be
// valid UTF-8. Matches are found on runes; their byte offsets are tracked by
// walking text alongside, which costs one pass instead of regexp2's table of
// offsets (an int per rune).
func (t *tiktokenEncoder) pieces(text string, yield func(string)) error {
	if text == "" {
		return nil
	}
	m, err := t.split.FindStringMatch(text)
	runeAt, byteAt := 0, 0
	for ; m != nil && err == nil; m, err = t.split.FindNextMatch(m) {
		for ; runeAt < m.RuneIndex; runeAt++ { // unmatched runes (none with these patterns)
			_, size := utf8.DecodeRuneInString(text[byteAt:])
			byteAt += size
		}
		start := byteAt
		for end := runeAt + m.RuneLength; runeAt < end; runeAt++ {
			_, size := utf8.DecodeRuneInString(text[byteAt:])
			byteAt += size
		}
		yield(text[start:byteAt])
	}
	if err != nil {
		return fmt.Errorf("encoding %s: split: %w", t.name, err)
	}
	return nil
}

func (t *tiktokenEncoder) Decode(ids []uint32) ([]byte, error) {
	out := make([]byte, 0, len(ids)*4)
	run := make([]uint, 0, len(ids))
	start := 0 // index in ids of run[0]
	flush := func() error {
		if len(run) == 0 {
			return nil
		}
		s, err := t.dec.Decode(run)
		if err != nil {
			return t.invalid(run, start)
		}
		out = append(out, s...)
		run = run[:0]
		return nil
	}
	for i, id := range ids {
		text, ok := t.specials.byID[id]
		if !ok {
			run = append(run, uint(id))
			continue
		}
		if err := flush(); err != nil {
			return nil, err
		}
		out = append(out, text...)
		start = i + 1
	}
	if err := flush(); err != nil {
		return nil, err
	}
	return out, nil
}

// invalid finds which id of run (run[0] being ids[base]) the engine rejected,
// so that the error names it; the engine's own error gives no position.
func (t *tiktokenEncoder) invalid(run []uint, base int) error {
	for i, id := range run {
		if _, err := t.dec.Decode([]uint{id}); err != nil {
			return fmt.Errorf("%w %d at index %d for %s", ErrInvalidToken, id, base+i, t.name)
		}
	}
	return fmt.Errorf("%w for %s", ErrInvalidToken, t.name)
}
