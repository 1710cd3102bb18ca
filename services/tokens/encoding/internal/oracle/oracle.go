// Package oracle is the reference the encoder's tests compare with: the
// previous engine, built on github.com/tiktoken-go/tokenizer's vocabularies
// and a regular-expression pre-tokenizer (regexp2's backtracking interpreter
// running tiktoken's patterns verbatim, widened to Unicode 16.0). It was
// checked token for token against OpenAI's tiktoken (fixed vectors and the
// Node.js differential test). Only tests import it: it keeps the library and
// the regex engine out of the service's binary.
package oracle

import (
	"fmt"
	"reflect"
	"strings"
	"sync"
	"unicode/utf8"
	"unsafe"

	"github.com/dlclark/regexp2/v2"
	"github.com/tiktoken-go/tokenizer"

	"github.com/baagent/baagent/services/tokens/encoding/pretok"
)

// Patterns are the pre-tokenizer patterns, verbatim from
// tiktoken_ext/openai_public.py.
var Patterns = map[string]string{
	"o200k_base":  `[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`,
	"cl100k_base": `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`,
	"p50k_base":   `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`,
	"r50k_base":   `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`,
}

// Oracle is one encoding's reference: split, ordinary encoding, decoding.
// Safe for concurrent use.
type Oracle struct {
	name  string
	split *regexp2.Regexp
	ranks map[string]uint
	dec   tokenizer.Codec
}

var (
	mu      sync.Mutex
	oracles = map[string]*Oracle{}
)

// Get returns the reference of encoding name (built once per process: the
// library's tables take about a second).
func Get(name string) (*Oracle, error) {
	mu.Lock()
	defer mu.Unlock()
	if o, ok := oracles[name]; ok {
		return o, nil
	}
	pat, ok := Patterns[name]
	if !ok {
		return nil, fmt.Errorf("oracle: unknown encoding %q", name)
	}
	dec, err := tokenizer.Get(tokenizer.Encoding(name))
	if err != nil {
		return nil, err
	}
	dec.SetErrorMode(tokenizer.ErrorModeNone)
	ranks, err := ranksOf(dec)
	if err != nil {
		return nil, err
	}
	// regexp2's generated matcher splits "\n \n" wrongly; any compile option
	// keeps it out, and no backtracking-stack limit lets multi-megabyte
	// whitespace runs through.
	re := regexp2.MustCompile(WidenToUnicode16(pat), regexp2.None, regexp2.OptionMaxBacktrackingStackSize(-1))
	o := &Oracle{name: name, split: re, ranks: ranks, dec: dec}
	oracles[name] = o
	return o, nil
}

// Split returns the pre-tokenizer pieces of text (valid UTF-8).
func (o *Oracle) Split(text string) ([]string, error) {
	var out []string
	if text == "" {
		return nil, nil
	}
	m, err := o.split.FindStringMatch(text)
	runeAt, byteAt, covered := 0, 0, 0
	for ; m != nil && err == nil; m, err = o.split.FindNextMatch(m) {
		start := -1
		for ; runeAt < m.RuneIndex+m.RuneLength; runeAt++ {
			if runeAt == m.RuneIndex {
				start = byteAt
			}
			_, size := utf8.DecodeRuneInString(text[byteAt:])
			byteAt += size
		}
		if start < 0 || start != covered {
			return nil, fmt.Errorf("oracle %s: split skipped text at rune %d", o.name, m.RuneIndex)
		}
		out = append(out, text[start:byteAt])
		covered = byteAt
	}
	return out, err
}

// EncodeOrdinary returns the token ids of text (valid UTF-8), special-token
// text being ordinary text: tiktoken's encode_ordinary.
func (o *Oracle) EncodeOrdinary(text string) ([]uint32, error) {
	pieces, err := o.Split(text)
	if err != nil {
		return nil, err
	}
	var ids []uint32
	for _, p := range pieces {
		ids = bpe(o.ranks, p, ids)
	}
	return ids, nil
}

// Rank returns the rank of token bytes tok.
func (o *Oracle) Rank(tok string) (uint32, bool) {
	r, ok := o.ranks[tok]
	return uint32(r), ok
}

// Ranks returns the number of ordinary tokens.
func (o *Oracle) Ranks() int { return len(o.ranks) }

// Merge returns the byte-pair merge of piece, without the whole-piece lookup.
func (o *Oracle) Merge(piece string) []uint32 {
	if len(piece) < heapThreshold {
		return bpeScan(o.ranks, piece, nil)
	}
	return bpeHeap(o.ranks, piece, nil)
}

// Decode returns the bytes of ordinary ids, or an error for an unknown one.
func (o *Oracle) Decode(ids []uint32) ([]byte, error) {
	run := make([]uint, len(ids))
	for i, id := range ids {
		run[i] = uint(id)
	}
	s, err := o.dec.Decode(run)
	return []byte(s), err
}

// WidenToUnicode16 adds to every \p{X} of pattern the characters that
// Unicode 16.0, the version of tiktoken's regular-expression engine, puts in
// category X and Go's older unicode tables do not. Inside a bracket class
// the characters are appended to it; outside, \p{X} becomes a class of its
// own.
func WidenToUnicode16(pattern string) string {
	var b strings.Builder
	inClass := false
	for i := 0; i < len(pattern); i++ {
		c := pattern[i]
		switch {
		case c == '\\' && strings.HasPrefix(pattern[i:], `\p{`):
			end := strings.IndexByte(pattern[i:], '}')
			prop := pattern[i : i+end+1]
			extra := pretok.UnicodeAdditions(prop[3 : len(prop)-1])
			switch {
			case extra == "":
				b.WriteString(prop)
			case inClass:
				b.WriteString(prop + extra)
			default:
				b.WriteString("[" + prop + extra + "]")
			}
			i += end
		case c == '\\' && i+1 < len(pattern):
			b.WriteString(pattern[i : i+2])
			i++
		case c == '[':
			inClass = true
			b.WriteByte(c)
		case c == ']':
			inClass = false
			b.WriteByte(c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// ranksOf reads the engine's unexported token -> rank table, checked by
// reflection so that an engine upgrade that changes it fails loudly.
func ranksOf(c tokenizer.Codec) (map[string]uint, error) {
	v := reflect.ValueOf(c)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return nil, fmt.Errorf("oracle: unexpected engine codec type %T", c)
	}
	f := v.Elem().FieldByName("vocabulary")
	if !f.IsValid() || f.Type().Kind() != reflect.Map ||
		f.Type().Key().Kind() != reflect.String || f.Type().Elem().Kind() != reflect.Uint {
		return nil, fmt.Errorf("oracle: engine codec %T has no vocabulary map[string]uint field", c)
	}
	ranks := *(*map[string]uint)(unsafe.Pointer(f.UnsafeAddr()))
	if len(ranks) == 0 {
		return nil, fmt.Errorf("oracle: engine codec %T has an empty vocabulary", c)
	}
	return ranks, nil
}
