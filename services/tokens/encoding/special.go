package encoding

import "strings"

// specialTokens are the special tokens of each encoding with their ids, as
// tiktoken defines them (tiktoken_ext/openai_public.py). The engine we wrap
// knows these but never emits them, so they are handled here.
var specialTokens = map[string]map[string]uint32{
	O200kBase: {
		"<|endoftext|>":   199999,
		"<|endofprompt|>": 200018,
	},
	Cl100kBase: {
		"<|endoftext|>":   100257,
		"<|fim_prefix|>":  100258,
		"<|fim_middle|>":  100259,
		"<|fim_suffix|>":  100260,
		"<|endofprompt|>": 100276,
	},
	P50kBase: {
		"<|endoftext|>": 50256,
	},
	R50kBase: {
		"<|endoftext|>": 50256,
	},
}

// specialPrefix starts every special token of every encoding, which lets
// [specials.next] find the next candidate with one strings.Index instead of
// one search per token (which would rescan the text for tokens it lacks).
const specialPrefix = "<|"

// specials is one encoding's special tokens, in both directions.
type specials struct {
	byText map[string]uint32
	byID   map[uint32]string
}

func newSpecials(name string) specials {
	s := specials{byText: specialTokens[name], byID: make(map[uint32]string)}
	for text, id := range s.byText {
		if !strings.HasPrefix(text, specialPrefix) {
			panic("encoding: special token " + text + " does not start with " + specialPrefix)
		}
		s.byID[id] = text
	}
	return s
}

// next finds the leftmost special token in text. It returns its byte offset,
// its length and its id, or -1 when text holds none. No special token of
// these encodings is a prefix of another, so leftmost is unambiguous, as it is
// for tiktoken's alternation of the escaped tokens. Cost is linear in text:
// each "<|" is compared with at most a handful of short tokens.
func (s specials) next(text string) (at, length int, id uint32) {
	for off := 0; ; off += len(specialPrefix) {
		i := strings.Index(text[off:], specialPrefix)
		if i < 0 {
			return -1, 0, 0
		}
		off += i
		for tok, id := range s.byText {
			if strings.HasPrefix(text[off:], tok) {
				return off, len(tok), id
			}
		}
	}
}
