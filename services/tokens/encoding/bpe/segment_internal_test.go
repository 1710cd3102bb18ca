package bpe

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/baagent/baagent/services/tokens/encoding/internal/testcorpus"
)

// TestMergeSegmentsAnyLimit: the merge by segments equals the heap merge
// whatever the repair limit, so also when repairs give up early (the
// fallback, which the real limit almost never reaches) and when the seams
// fall inside tokens.
func TestMergeSegmentsAnyLimit(t *testing.T) {
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
				if got := v.mergeSegmentsUpTo(piece, &s, nil, limit); !slices.Equal(got, want) {
					t.Fatalf("%s limit %d: %q\n got %v\nwant %v", name, limit, piece, got, want)
				}
			}
		}
	}
}

// TestCompatibleIsPairEncoding checks the compatibility cache against its
// definition on pairs of tokens seen in text, hits and misses alike.
func TestCompatibleIsPairEncoding(t *testing.T) {
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
