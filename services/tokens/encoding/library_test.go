package encoding

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/baagent/baagent/services/tokens/encoding/internal/oracle"
	"github.com/baagent/baagent/services/tokens/encoding/internal/testcorpus"
)

// The reference for these tests is internal/oracle: the previous engine,
// github.com/tiktoken-go/tokenizer's vocabularies with tiktoken's patterns
// run by regexp2, itself checked against OpenAI's tiktoken. Special tokens
// are cut with the same [specials] as the engine (checked against tiktoken
// by the fixed vectors).

// reference encodes text as the oracle does.
func reference(t testing.TB, name, text string, allowSpecial bool) []uint32 {
	t.Helper()
	o, err := oracle.Get(name)
	if err != nil {
		t.Fatal(err)
	}
	text = ToValidUTF8(text)
	sp := newSpecials(name)
	var ids []uint32
	for allowSpecial {
		at, length, id := sp.next(text)
		if at < 0 {
			break
		}
		part, err := o.EncodeOrdinary(text[:at])
		if err != nil {
			t.Fatal(err)
		}
		ids = append(append(ids, part...), id)
		text = text[at+length:]
	}
	part, err := o.EncodeOrdinary(text)
	if err != nil {
		t.Fatal(err)
	}
	return append(ids, part...)
}

// checkAgainstLibrary compares Encode and Count with the reference.
func checkAgainstLibrary(t *testing.T, e Encoder, text string, allowSpecial bool) bool {
	t.Helper()
	want := reference(t, e.Name(), text, allowSpecial)
	got, err := e.Encode(text, allowSpecial)
	if err != nil || !slices.Equal(got, want) {
		at := 0
		for at < min(len(got), len(want)) && got[at] == want[at] {
			at++
		}
		t.Errorf("%s allow=%v %.200q: Encode differs from token %d (%d tokens, want %d), err %v", e.Name(), allowSpecial, text, at, len(got), len(want), err)
		return false
	}
	if n, err := e.Count(text, allowSpecial); err != nil || n != len(want) {
		t.Errorf("%s allow=%v %.200q: Count = %d, %v; want %d", e.Name(), allowSpecial, text, n, err, len(want))
		return false
	}
	return true
}

// TestMatchesLibrary compares every encoding with the reference on a
// generated corpus: the hard cases in random combinations, mixed prose in
// five scripts, code, emoji, whitespace and digit runs and random code
// points, and long unbroken runs that exercise the heap merge.
func TestMatchesLibrary(t *testing.T) {
	t.Parallel()

	set := newTestSet(t)
	texts := testcorpus.Atoms(21, 2000, 24)
	mixed := testcorpus.Mixed(22, 400_000)
	for i := 0; i < len(mixed); i += 4096 {
		end := min(i+4096, len(mixed))
		for end < len(mixed) && !utf8.RuneStart(mixed[end]) {
			end++
		}
		texts = append(texts, mixed[i:end])
	}
	texts = append(texts, mixed, testcorpus.Bench(23, 100_000, 100_000)[0],
		strings.Repeat("a", 20_000), strings.Repeat("中文字符", 5000), strings.Repeat(" ", 20_000)+"x",
		strings.Repeat("1", 10_001), strings.Repeat("\n \n", 3000), strings.Repeat("👍🏽", 3000), strings.Repeat("ab'", 3000))
	for _, name := range Names() {
		e, _ := set.Get(name)
		fails := 0
		for i, text := range texts {
			if !checkAgainstLibrary(t, e, text, i%2 == 0) {
				if fails++; fails > 10 {
					t.Fatalf("%s: too many differences", name)
				}
			}
		}
	}
}

func fuzzAgainstLibrary(f *testing.F, name string) {
	set := newTestSet(f)
	e, _ := set.Get(name)
	for _, s := range testcorpus.Atoms(24, 40, 12) {
		f.Add(s, false)
	}
	f.Add(specialText, true)
	f.Add(testcorpus.Mixed(25, 3000), false)
	f.Fuzz(func(t *testing.T, text string, allowSpecial bool) {
		if !utf8.ValidString(text) {
			text = strings.ToValidUTF8(text, "\ufffd")
		}
		checkAgainstLibrary(t, e, text, allowSpecial)
	})
}

// FuzzO200kMatchesLibrary and its siblings compare one encoding with the
// reference on arbitrary valid UTF-8 (run each for a minute:
// go test -run '^$' -fuzz FuzzO200kMatchesLibrary -fuzztime 60s).
func FuzzO200kMatchesLibrary(f *testing.F)  { fuzzAgainstLibrary(f, O200kBase) }
func FuzzCl100kMatchesLibrary(f *testing.F) { fuzzAgainstLibrary(f, Cl100kBase) }
func FuzzP50kMatchesLibrary(f *testing.F)   { fuzzAgainstLibrary(f, P50kBase) }
func FuzzR50kMatchesLibrary(f *testing.F)   { fuzzAgainstLibrary(f, R50kBase) }

// TestCountDoesNotAllocate: after warm-up, Count of up to 64 KiB allocates
// nothing, special tokens allowed or not.
func TestCountDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	set := newTestSet(t)
	text := strings.Join(testcorpus.Bench(26, 64<<10, 64<<10), "")[:64<<10]
	text = strings.ToValidUTF8(text, "")
	for _, name := range Names() {
		e, _ := set.Get(name)
		for _, allow := range []bool{false, true} {
			e.Count(text, allow)
			if n := testing.AllocsPerRun(20, func() { e.Count(text, allow) }); n != 0 {
				t.Errorf("%s allow=%v: Count allocates %.1f times per call", name, allow, n)
			}
		}
	}
}
