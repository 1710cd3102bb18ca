package bpe_test

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/baagent/baagent/services/tokens/encoding/bpe"
	"github.com/baagent/baagent/services/tokens/encoding/internal/oracle"
	"github.com/baagent/baagent/services/tokens/encoding/internal/testcorpus"
)

// TestMergeMatchesLibrary compares Merge with the reference merge on random
// pieces of every length, short (scan) and long (heap), built from
// fragments that merge in many ways, and on the generated mixed corpus cut
// at random.
func TestMergeMatchesLibrary(t *testing.T) {
	t.Parallel()

	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"a", "b", "e", "r", "s", "t", "ing", "tion", " the", "é", "中", "文", "😀", "0", "  ", "\n", "'", "ſ", "\xe4", "\xb8"}
	mixed := testcorpus.Mixed(5, 100_000)
	for _, name := range names {
		v := load(t, name)
		o, err := oracle.Get(name)
		if err != nil {
			t.Fatal(err)
		}
		var s bpe.Scratch
		for i := range 4000 {
			var piece string
			if i%2 == 0 {
				var b strings.Builder
				for n := rng.IntN(3 * 24); b.Len() < n; {
					b.WriteString(alphabet[rng.IntN(len(alphabet))])
				}
				piece = b.String()
			} else {
				at := rng.IntN(len(mixed) - 200)
				piece = mixed[at : at+rng.IntN(200)] // need not be valid UTF-8
			}
			got := v.Merge(piece, &s, nil)
			want := o.Merge(piece)
			if len(piece) == 0 {
				want = nil
			}
			if !slices.Equal(got, want) {
				t.Fatalf("%s: Merge(%q)\n got %v\nwant %v", name, piece, got, want)
			}
		}
	}
}

// TestMergeLongRuns: the heap merge on the worst cases, against the
// reference's heap.
func TestMergeLongRuns(t *testing.T) {
	t.Parallel()

	for _, name := range names {
		v := load(t, name)
		o, _ := oracle.Get(name)
		var s bpe.Scratch
		for _, piece := range []string{strings.Repeat("a", 5000), strings.Repeat("中文", 2000), strings.Repeat(" ", 3001), strings.Repeat("ab", 2500)} {
			if got, want := v.Merge(piece, &s, nil), o.Merge(piece); !slices.Equal(got, want) {
				t.Fatalf("%s: Merge(%.20q...) differs: %d tokens, want %d", name, piece, len(got), len(want))
			}
		}
	}
}

// FuzzMerge compares Merge with the reference on arbitrary bytes.
func FuzzMerge(f *testing.F) {
	vs := map[string]*bpe.Vocabulary{}
	for _, name := range names {
		vs[name] = load(f, name)
	}
	f.Add("hello world")
	f.Add(strings.Repeat("ab", 40))
	f.Fuzz(func(t *testing.T, piece string) {
		var s bpe.Scratch
		for _, name := range names {
			o, _ := oracle.Get(name)
			got, want := vs[name].Merge(piece, &s, nil), o.Merge(piece)
			if len(piece) == 0 {
				want = nil
			}
			if !slices.Equal(got, want) {
				t.Fatalf("%s: Merge(%q)\n got %v\nwant %v", name, piece, got, want)
			}
		}
	})
}

func BenchmarkMergeWorstCase(b *testing.B) {
	v := load(b, "cl100k_base")
	for _, c := range []struct{ name, piece string }{
		{"a-1MiB", strings.Repeat("a", 1<<20)},
		{"CJK-1MiB", strings.Repeat("中文字符测试", 1<<20/18)},
	} {
		b.Run(c.name, func(b *testing.B) {
			var s bpe.Scratch
			b.SetBytes(int64(len(c.piece)))
			for b.Loop() {
				v.Merge(c.piece, &s, nil)
			}
		})
	}
}
