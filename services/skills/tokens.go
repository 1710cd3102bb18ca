package skills

import (
	"context"
	"unicode/utf8"
)

// TokenCounter counts the tokens text takes for a model. The application
// passes a client of the tokens service (exact BPE per model); tests and
// stand-alone use fall back to [EstimateTokens].
type TokenCounter interface {
	CountTokens(ctx context.Context, text, model string) (int, error)
}

// EstimateTokens is a conservative local estimate of the tokens text takes
// with a byte-level BPE tokenizer (o200k_base, cl100k_base and the tokenizers
// of the other model families), used when no TokenCounter is configured, when
// a request names no model, and when the counter fails. It errs high, so a
// catalog sized with it fits the real budget:
//
//   - a run of ASCII letters, or of ASCII digits, takes one token per three
//     characters (BPE averages about four per token on English prose, and
//     splits numbers into groups of at most three digits);
//   - a single space is free (BPE merges it into the following word), longer
//     runs of spaces take one token per four;
//   - every other ASCII character (punctuation, newline, tab) takes one token;
//   - non-ASCII text takes one token per two bytes (about one and a half per
//     CJK character, which BPE encodes in one or two; invalid bytes count one
//     each).
//
// It is additive over lines: the estimate of a text joined by newlines is the
// sum of the estimates of its lines plus one per newline, which the catalog
// planner relies on.
func EstimateTokens(text string) int {
	n := 0
	letters, digits, spaces := 0, 0, 0
	flush := func() {
		n += (letters + 2) / 3
		n += (digits + 2) / 3
		if spaces > 1 {
			n += (spaces - 1 + 3) / 4
		}
		letters, digits, spaces = 0, 0, 0
	}
	for i := 0; i < len(text); {
		c := text[i]
		switch {
		case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			if digits > 0 || spaces > 0 {
				flush()
			}
			letters++
			i++
		case c >= '0' && c <= '9':
			if letters > 0 || spaces > 0 {
				flush()
			}
			digits++
			i++
		case c == ' ':
			if letters > 0 || digits > 0 {
				flush()
			}
			spaces++
			i++
		case c < utf8.RuneSelf:
			flush()
			n++
			i++
		default:
			flush()
			_, size := utf8.DecodeRuneInString(text[i:])
			n += (size + 1) / 2
			i += size
		}
	}
	flush()
	return n
}
