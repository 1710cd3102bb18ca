package bpe

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/baagent/baagent/services/tokens/encoding/internal/testcorpus"
)

// TestMergeSegmentsAnyLimit: the merge by segments equals the heap merge
// whatever the repair limit and budget, so also when repairs give up early
// (the fallback, which the real bounds almost never reach) and when the
// seams fall inside tokens.
func TestMergeSegmentsAnyLimit(t *testing.T) {
	t.Parallel()

	rng := rand.New(rand.NewPCG(3, 4))
	mixed := testcorpus.Mixed(9, 200_000)
	alphabet := []string{"a", "aa", " ", "  ", "\n", "0", "中", "文", "字符", "é", "'s", "=", "ab", "\xe4", "\xb8"}
	for _, name := range []string{"o200k_base", "cl100k_base", "r50k_base"} {
		v, err := Load(name)
		if err != nil {
			t.Fatal(err)
		}
		var s Scratch
		for i := range 3000 {
			var piece string
			if i%2 == 0 {
				at := rng.IntN(len(mixed) - 600)
				piece = mixed[at : at+rng.IntN(600)]
			} else {
				var b strings.Builder
				for n := rng.IntN(400); b.Len() < n; {
					b.WriteString(alphabet[rng.IntN(len(alphabet))])
				}
				piece = b.String()
			}
			if piece == "" {
				continue
			}
			want := v.mergeHeap(piece, &s, nil)
			for _, limit := range []int{0, 7, 40, maxRepair} {
				for _, budget := range []int{0, 20, 1 << 30} {
					if got := v.mergeSegmentsUpTo(piece, &s, nil, limit, budget); !slices.Equal(got, want) {
						t.Fatalf("%s limit %d budget %d: %q\n got %v\nwant %v", name, limit, budget, piece, got, want)
					}
				}
			}
			if got := v.mergeSegments(piece, &s, nil); !slices.Equal(got, want) {
				t.Fatalf("%s: %q\n got %v\nwant %v", name, piece, got, want)
			}
		}
	}
}

// TestCompatibleIsPairEncoding checks the compatibility cache against its
// definition on pairs of tokens seen in text, hits and misses alike.
func TestCompatibleIsPairEncoding(t *testing.T) {
	t.Parallel()

	v, err := Load("o200k_base")
	if err != nil {
		t.Fatal(err)
	}
	var s Scratch
	toks := v.mergeHeap(testcorpus.Mixed(2, 20_000), &s, nil)
	rng := rand.New(rand.NewPCG(5, 6))
	yes := 0
	for range 20_000 {
		a, b := toks[rng.IntN(len(toks))], toks[rng.IntN(len(toks))]
		if rng.IntN(2) == 0 {
			i := rng.IntN(len(toks) - 1)
			a, b = toks[i], toks[i+1]
		}
		got := v.compatible(&s, a, b)
		e := v.mergeHeap(v.Token(a)+v.Token(b), &s, nil)
		if want := len(e) == 2 && e[0] == a && e[1] == b; got != want {
			t.Fatalf("compatible(%q, %q) = %v, want %v", v.Token(a), v.Token(b), got, want)
		}
		if got {
			yes++
		}
	}
	if yes == 0 || yes == 20_000 {
		t.Fatalf("%d of 20000 pairs compatible: the test does not test both answers", yes)
	}
}

// TestSplitsOutrankParts: every token of every vocabulary has a merge tree
// whose ranks grow towards the root, so the tree walk of compatible applies
// everywhere (it falls back to merging where it would not).
func TestSplitsOutrankParts(t *testing.T) {
	t.Parallel()

	if testing.Short() {
		t.Skip("merges every token")
	}
	for _, name := range []string{"o200k_base", "cl100k_base", "p50k_base", "r50k_base"} {
		v, err := Load(name)
		if err != nil {
			t.Fatal(err)
		}
		step := uint32(1)
		if raceEnabled {
			step = 97
		}
		for id := uint32(0); id < uint32(v.Len()); id += step {
			if !v.Valid(id) || v.length[id] < 2 {
				continue
			}
			l, r, ok := v.split(id)
			if !ok {
				t.Fatalf("%s: token %d %q: a part of its last merge does not rank below it", name, id, v.Token(id))
			}
			if v.Token(l)+v.Token(r) != v.Token(id) {
				t.Fatalf("%s: token %d %q splits into %q + %q", name, id, v.Token(id), v.Token(l), v.Token(r))
			}
		}
	}
}

// TestPairCrossesMatchesMerge: the tree walk answers as merging the pair
// does, on pairs of tokens from text and on random pairs, in every
// vocabulary.
func TestPairCrossesMatchesMerge(t *testing.T) {
	t.Parallel()

	rng := rand.New(rand.NewPCG(7, 8))
	text := testcorpus.Mixed(4, 30_000)
	for _, name := range []string{"o200k_base", "cl100k_base", "p50k_base", "r50k_base"} {
		v, err := Load(name)
		if err != nil {
			t.Fatal(err)
		}
		var s Scratch
		toks := v.mergeHeap(text, &s, nil)
		counts := [2]int{}
		for i := range 30_000 {
			var a, b uint32
			switch i % 3 {
			case 0: // adjacent in E(text): compatible
				k := rng.IntN(len(toks) - 1)
				a, b = toks[k], toks[k+1]
			case 1: // from text, anywhere
				a, b = toks[rng.IntN(len(toks))], toks[rng.IntN(len(toks))]
			default: // any tokens
				a, b = validToken(rng, v), validToken(rng, v)
			}
			crosses, ok := v.pairCrosses(&s, a, b)
			if !ok {
				t.Fatalf("%s: walk does not apply to %q + %q", name, v.Token(a), v.Token(b))
			}
			if want := !v.mergesToPair(&s, a, b); crosses != want {
				t.Fatalf("%s: pairCrosses(%q, %q) = %v, merging says %v", name, v.Token(a), v.Token(b), crosses, want)
			}
			if crosses {
				counts[1]++
			} else {
				counts[0]++
			}
		}
		if counts[0] == 0 || counts[1] == 0 {
			t.Fatalf("%s: %v compatible/crossing pairs: both answers must be tested", name, counts)
		}
	}
}

// FuzzPairCrosses compares the tree walk with merging on arbitrary pairs of
// tokens (ids taken modulo the vocabulary).
func FuzzPairCrosses(f *testing.F) {
	v, err := Load("o200k_base")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(uint32(64), uint32(64))
	f.Add(uint32(1000), uint32(99999))
	f.Fuzz(func(t *testing.T, a, b uint32) {
		a, b = a%uint32(v.Len()), b%uint32(v.Len())
		if !v.Valid(a) || !v.Valid(b) {
			return
		}
		var s Scratch
		crosses, ok := v.pairCrosses(&s, a, b)
		if !ok {
			t.Fatalf("walk does not apply to %q + %q", v.Token(a), v.Token(b))
		}
		if want := !v.mergesToPair(&s, a, b); crosses != want {
			t.Fatalf("pairCrosses(%q, %q) = %v, merging says %v", v.Token(a), v.Token(b), crosses, want)
		}
	})
}

// validToken draws token ids until one is in the vocabulary.
func validToken(rng *rand.Rand, v *Vocabulary) uint32 {
	for {
		if t := uint32(rng.IntN(v.Len())); v.Valid(t) {
			return t
		}
	}
}
