package embed

import (
	"context"
	"fmt"
	"math"
	"strings"
	"unicode"
	"unicode/utf8"
)

// LexicalModel names the lexical embedding.
const LexicalModel = "lexical-hash-v1"

// DefaultLexicalDims is the lexical embedding's default dimension.
const DefaultLexicalDims = 256

// Feature weights: whole words count most, word pairs keep some word
// order, character trigrams let inflections and typos ("revenues",
// "reveneu") still overlap.
const (
	weightWord    = 1.0
	weightBigram  = 0.5
	weightTrigram = 0.25
)

// maxLexicalRunes bounds the text one vector is computed from; the rest is
// ignored (entity names and summaries are far shorter).
const maxLexicalRunes = 1 << 16

// Lexical is an offline stand-in for an embedding model: it hashes the
// lower-cased words, word bigrams and character trigrams of a text into a
// fixed number of signed buckets (feature hashing, FNV-1a 64) and
// L2-normalises the result. It is deterministic and needs no model or
// network.
//
// It is lexical, not semantic: texts are close when they share words or
// spellings, so "revenue" and "revenues" are close, but "revenue" and
// "sales" or "turnover" are not, and nothing is known across languages.
// Use it where no embedding endpoint is configured; vectors of different
// models (or dimensions) must not be compared.
type Lexical struct {
	dims int
}

// NewLexical returns a lexical embedder of dims dimensions
// (DefaultLexicalDims when dims <= 0).
func NewLexical(dims int) *Lexical {
	if dims <= 0 {
		dims = DefaultLexicalDims
	}
	return &Lexical{dims: dims}
}

// Model is LexicalModel, with the dimension when it is not the default
// ("lexical-hash-v1/512"), since vectors of different sizes do not compare.
func (l *Lexical) Model() string {
	if l.dims == DefaultLexicalDims {
		return LexicalModel
	}
	return fmt.Sprintf("%s/%d", LexicalModel, l.dims)
}

// Dims is the vector length.
func (l *Lexical) Dims() int { return l.dims }

// Embed embeds each text. It fails only when ctx has ended.
func (l *Lexical) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i, t := range texts {
		if i%64 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		out[i] = l.Vector(t)
	}
	return out, nil
}

// Vector embeds one text. A text without words (empty, punctuation only)
// gets the vector of a reserved feature, so that every vector is unit
// length.
func (l *Lexical) Vector(text string) []float32 {
	acc := make([]float64, l.dims)
	words := tokenize(text)
	if len(words) == 0 {
		l.addHash(acc, fnvString(fnvOffset, emptyFeature), 1)
	}
	var runes []rune
	for i, w := range words {
		// The features are the strings "w\x00word", "b\x00prev\x00word" and
		// "t\x00abc"; FNV-1a is computed over them piece by piece.
		l.addHash(acc, fnvString(fnvString(fnvOffset, "w\x00"), w), weightWord)
		if i > 0 {
			h := fnvString(fnvString(fnvOffset, "b\x00"), words[i-1])
			h = fnvString(fnvByte(h, 0), w)
			l.addHash(acc, h, weightBigram)
		}
		runes = l.trigrams(acc, w, runes)
	}
	var norm float64
	for _, v := range acc {
		norm += v * v
	}
	if norm == 0 {
		// All features cancelled out (opposite signs in one bucket): fall
		// back to the reserved feature.
		l.addHash(acc, fnvString(fnvOffset, emptyFeature), 1)
		norm = 1
	}
	norm = math.Sqrt(norm)
	vec := make([]float32, l.dims)
	for i, v := range acc {
		vec[i] = float32(v / norm)
	}
	return vec
}

// emptyFeature is the feature of a text without words.
const emptyFeature = "\x00empty"

var trigramPrefix = fnvString(fnvOffset, "t\x00")

// trigrams adds the character trigrams of "^word$"; buf is reused.
func (l *Lexical) trigrams(acc []float64, w string, buf []rune) []rune {
	r := buf[:0]
	r = append(r, '^')
	for _, c := range w {
		r = append(r, c)
	}
	r = append(r, '$')
	var enc [utf8.UTFMax]byte
	for i := 0; i+3 <= len(r); i++ {
		h := trigramPrefix
		for _, c := range r[i : i+3] {
			n := utf8.EncodeRune(enc[:], c)
			for _, b := range enc[:n] {
				h = fnvByte(h, b)
			}
		}
		l.addHash(acc, h, weightTrigram)
	}
	return r
}

// addHash adds w to the bucket the low bits select, with the sign of the
// top bit, so that collisions cancel out on average instead of piling up.
func (l *Lexical) addHash(acc []float64, h uint64, w float64) {
	i := int(h % uint64(l.dims))
	if h>>63 == 1 {
		w = -w
	}
	acc[i] += w
}

const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

// fnvString continues the FNV-1a 64 hash h over s.
func fnvString(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= fnvPrime
	}
	return h
}

func fnvByte(h uint64, b byte) uint64 {
	h ^= uint64(b)
	return h * fnvPrime
}

// tokenize splits text into lower-cased words: runs of letters and digits
// (with inner apostrophes dropped: "customer's" → "customers").
func tokenize(text string) []string {
	if utf8.RuneCountInString(text) > maxLexicalRunes {
		n := 0
		for i := range text {
			if n == maxLexicalRunes {
				text = text[:i]
				break
			}
			n++
		}
	}
	// One lower-cased copy of the text; the words are slices of it.
	var b strings.Builder
	b.Grow(len(text))
	var bounds [][2]int
	start := -1
	for _, r := range text {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			if start < 0 {
				start = b.Len()
			}
			b.WriteRune(unicode.ToLower(r))
		case r == '\'' || r == '’':
			// inside a word: skip
		default:
			if start >= 0 {
				bounds = append(bounds, [2]int{start, b.Len()})
				start = -1
			}
		}
	}
	if start >= 0 {
		bounds = append(bounds, [2]int{start, b.Len()})
	}
	lower := b.String()
	words := make([]string, len(bounds))
	for i, bd := range bounds {
		words[i] = lower[bd[0]:bd[1]]
	}
	return words
}
