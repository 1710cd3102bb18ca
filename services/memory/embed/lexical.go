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
		l.add(acc, "\x00empty", 1)
	}
	for i, w := range words {
		l.add(acc, "w\x00"+w, weightWord)
		if i > 0 {
			l.add(acc, "b\x00"+words[i-1]+"\x00"+w, weightBigram)
		}
		l.trigrams(acc, w)
	}
	var norm float64
	for _, v := range acc {
		norm += v * v
	}
	vec := make([]float32, l.dims)
	if norm == 0 {
		// All features cancelled out (opposite signs in one bucket): fall
		// back to the reserved feature.
		l.add(acc, "\x00empty", 1)
		norm = 1
	}
	norm = math.Sqrt(norm)
	for i, v := range acc {
		vec[i] = float32(v / norm)
	}
	return vec
}

// trigrams adds the character trigrams of "^word$".
func (l *Lexical) trigrams(acc []float64, w string) {
	r := make([]rune, 0, len(w)+2)
	r = append(r, '^')
	r = append(r, []rune(w)...)
	r = append(r, '$')
	if len(r) < 3 {
		return
	}
	buf := make([]byte, 0, 16)
	for i := 0; i+3 <= len(r); i++ {
		buf = append(buf[:0], 't', 0)
		for _, c := range r[i : i+3] {
			buf = utf8.AppendRune(buf, c)
		}
		l.addBytes(acc, buf, weightTrigram)
	}
}

func (l *Lexical) add(acc []float64, feature string, w float64) {
	l.addHash(acc, fnv64(feature), w)
}

func (l *Lexical) addBytes(acc []float64, feature []byte, w float64) {
	h := uint64(fnvOffset)
	for _, c := range feature {
		h ^= uint64(c)
		h *= fnvPrime
	}
	l.addHash(acc, h, w)
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

func fnv64(s string) uint64 {
	h := uint64(fnvOffset)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= fnvPrime
	}
	return h
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
	var words []string
	var b strings.Builder
	flush := func() {
		if b.Len() > 0 {
			words = append(words, b.String())
			b.Reset()
		}
	}
	for _, r := range text {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(unicode.ToLower(r))
		case r == '\'' || r == '’':
			// inside a word: skip
		default:
			flush()
		}
	}
	flush()
	return words
}
