package memory

import (
	"math"
	"strings"
	"testing"
	"unicode"

	"github.com/baagent/baagent/services/memory/store"
)

// FuzzQueryText feeds arbitrary text to what reads a query or a name:
// queryWords gives non-empty words without spaces that begin and end with
// a letter or digit, and namesCompatible is symmetric and never panics.
func FuzzQueryText(f *testing.F) {
	for _, s := range [][2]string{
		{"What did Acme Labs buy?", "Acme Labs Inc"},
		{"ORD-1001, (Edge Router R1)!", "IBM"},
		{"  \t\n", "International Business Machines"},
		{"«Überraschung» 東京 ✓", "a\xffb"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		for _, w := range queryWords(a) {
			if w == "" || strings.ContainsFunc(w, unicode.IsSpace) {
				t.Fatalf("word %q of %q", w, a)
			}
			r := []rune(w)
			if ok := func(c rune) bool { return unicode.IsLetter(c) || unicode.IsDigit(c) }; !ok(r[0]) || !ok(r[len(r)-1]) {
				t.Fatalf("word %q of %q keeps punctuation at an end", w, a)
			}
		}
		if namesCompatible(a, b) != namesCompatible(b, a) {
			t.Fatalf("namesCompatible(%q, %q) is not symmetric", a, b)
		}
		if !namesCompatible(a, a) && len(nameWords(a)) > 0 {
			t.Fatalf("%q is not compatible with itself", a)
		}
	})
}

// FuzzFuse fuses lists built from arbitrary bytes: every score is the sum
// of its channels' terms, scores are non-increasing, ranks count from 1.
func FuzzFuse(f *testing.F) {
	f.Add([]byte("abcabd"), []byte("dcb"), uint16(60))
	f.Add([]byte{}, []byte("x"), uint16(1))
	f.Fuzz(func(t *testing.T, a, b []byte, k uint16) {
		kk := int(k%1000) + 1
		mk := func(bs []byte) []store.Scored {
			out := make([]store.Scored, len(bs))
			for i, c := range bs {
				out[i] = store.Scored{ID: string(rune('a' + c%16)), Score: float64(len(bs) - i)}
			}
			return out
		}
		got := fuse([]rankList{{channelVector, 0.4, mk(a)}, {channelKeyword, 0.6, mk(b)}}, kk)
		for i, h := range got {
			want := 0.0
			for _, c := range h.Channels {
				if c.Rank < 1 {
					t.Fatalf("rank %d", c.Rank)
				}
				w := 0.4
				if c.Channel == channelKeyword {
					w = 0.6
				}
				want += w / float64(kk+c.Rank)
			}
			if math.Abs(want-h.Score) > 1e-12 || (i > 0 && h.Score > got[i-1].Score) {
				t.Fatalf("hit %d %+v: score %v, want %v, order %v", i, h, h.Score, want, got)
			}
		}
	})
}
