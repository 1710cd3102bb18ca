package encoding

import (
	"fmt"
	"reflect"
	"strings"
	"unsafe"

	"github.com/dlclark/regexp2/v2"
	"github.com/tiktoken-go/tokenizer"
)

// The pre-tokenizer patterns, verbatim from tiktoken_ext/openai_public.py
// (the form shipped with tiktoken's registry, which is also the one
// github.com/tiktoken-go/tokenizer uses).
var patterns = map[string]string{
	O200kBase:  `[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`,
	Cl100kBase: `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`,
	P50kBase:   `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`,
	R50kBase:   `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`,
}

// compilePattern compiles name's pre-tokenizer for regexp2's interpreter.
//
// Why not the engine's own, generated matcher: in tokenizer v0.10.0 (regexp2
// v2.5.1 generated code) it splits "\n \n" into "\n", " \n" where tiktoken's
// `\s*[\r\n]+` backtracks to one piece "\n \n", so blank lines holding spaces,
// common in code, count wrong. The interpreter backtracks correctly. Passing
// any compile option changes regexp2's engine cache key, which is what keeps
// the generated matcher out; the one chosen, no backtracking-stack limit,
// is also needed: the default limit fails on multi-megabyte whitespace runs.
//
// The pattern is first widened to tiktoken's Unicode version (see
// widenToUnicode16).
func compilePattern(name string) *regexp2.Regexp {
	return regexp2.MustCompile(widenToUnicode16(patterns[name]), regexp2.None, regexp2.OptionMaxBacktrackingStackSize(-1))
}

// widenToUnicode16 adds to every \p{X} of pattern the characters that
// Unicode 16.0, the version of tiktoken's regular-expression engine, puts in
// category X and Go's older unicode tables do not (unicodeAdditions), so that
// a letter new in Unicode 15.1 or 16.0 splits as in tiktoken. Inside a
// bracket class the characters are appended to it; outside, \p{X} becomes a
// class of its own. A character new only in a later Unicode version stays
// unassigned, as it is in tiktoken.
func widenToUnicode16(pattern string) string {
	var b strings.Builder
	inClass := false
	for i := 0; i < len(pattern); i++ {
		c := pattern[i]
		switch {
		case c == '\\' && strings.HasPrefix(pattern[i:], `\p{`):
			end := strings.IndexByte(pattern[i:], '}')
			prop := pattern[i : i+end+1]
			extra := unicodeAdditions[prop[3:len(prop)-1]]
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

// ranksOf returns the BPE rank table (token bytes -> id) compiled into the
// engine for codec c. The engine does not export it, but its split is wrong
// (see compilePattern) and the only entry point that merges one piece also
// re-splits it; so we read the table, which the engine fills once before
// returning the codec and never writes again, and merge ourselves. The field
// is checked by reflection before the read, so an engine upgrade that changes
// it fails loudly at start-up (and in tests) instead of misbehaving.
//
// This goes away with our own engine and embedded vocabularies.
func ranksOf(c tokenizer.Codec) (map[string]uint, error) {
	v := reflect.ValueOf(c)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return nil, fmt.Errorf("encoding: unexpected engine codec type %T", c)
	}
	f := v.Elem().FieldByName("vocabulary")
	want := reflect.TypeFor[map[string]uint]()
	if !f.IsValid() || !f.Type().ConvertibleTo(want) || f.Type().Kind() != reflect.Map ||
		f.Type().Key().Kind() != reflect.String || f.Type().Elem().Kind() != reflect.Uint {
		return nil, fmt.Errorf("encoding: engine codec %T has no vocabulary map[string]uint field", c)
	}
	ranks := *(*map[string]uint)(unsafe.Pointer(f.UnsafeAddr()))
	if len(ranks) == 0 {
		return nil, fmt.Errorf("encoding: engine codec %T has an empty vocabulary", c)
	}
	return ranks, nil
}
