package pretok_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/baagent/baagent/services/tokens/encoding/internal/testcorpus"
	"github.com/baagent/baagent/services/tokens/encoding/pretok"
)

var patterns = []struct {
	name string
	p    pretok.Pattern
}{{"o200k", pretok.O200k}, {"cl100k", pretok.Cl100k}, {"gpt2", pretok.GPT2}}

// cutHolds reports, for the splitter s, whether cutting text at p keeps
// the pre-tokenization: no piece spans p, and the two halves split alone
// give the whole text's pieces. It returns a description of the failure.
func cutHolds(s pretok.Splitter, text string, p int) (bool, string) {
	whole := split(s, text)
	at := 0
	for i, piece := range whole {
		if at < p && p < at+len(piece) {
			return false, "piece " + strconvQ(piece) + " spans the cut"
		}
		if at == p {
			left, right := split(s, text[:p]), split(s, text[p:])
			if !slices.Equal(left, whole[:i]) {
				return false, "left half splits as " + strings.Join(quoteAll(left), " ") + ", not " + strings.Join(quoteAll(whole[:i]), " ")
			}
			if !slices.Equal(right, whole[i:]) {
				return false, "right half splits as " + strings.Join(quoteAll(right), " ")
			}
			return true, ""
		}
		at += len(piece)
	}
	return false, "cut point outside the text"
}

func strconvQ(s string) string { return "\"" + strings.ReplaceAll(s, "\n", `\n`) + "\"" }

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = strconvQ(s)
	}
	return out
}

// TestCanCutCounterexamples holds cut points that look plausible and are
// not safe for at least one pattern: each is refused by CanCut, and each
// breaks the pre-tokenization of the named pattern.
func TestCanCutCounterexamples(t *testing.T) {
	t.Parallel()

	c := newClasses(t)
	for _, tc := range []struct {
		why, left, right string
		breaks           pretok.Pattern
	}{
		{"after a newline: \\s*[\\r\\n]+ takes the run", "x\n", "\ny", pretok.Cl100k},
		{"after a newline, o200k", "x\n", "\ny", pretok.O200k},
		{"after a space: \\s+(?!\\S) leaves the last space to the word", "a ", "  b", pretok.O200k},
		{"after a space, GPT-2", "a ", "  b", pretok.GPT2},
		{"inside spaces before a newline", "a  ", "\nb", pretok.Cl100k},
		{"before an apostrophe: o200k's contraction suffix", "don", "'t", pretok.O200k},
		{"before a mark: o200k's letter classes hold marks", "e", "\u0301t", pretok.O200k},
		{"between digits: groups of three", "12", "34", pretok.Cl100k},
		{"between digits, GPT-2's \\p{N}+", "12", "34", pretok.GPT2},
		{"between letters", "hel", "lo", pretok.Cl100k},
		{"after punctuation before a letter: the optional prefix", "(", "word", pretok.Cl100k},
		{"after punctuation before a letter, o200k", "(", "word", pretok.O200k},
		{"punctuation before a newline: the [\\r\\n]* trailer", "x!", "\n", pretok.Cl100k},
		{"punctuation before a slash: o200k's [\\r\\n/]* trailer", "x!", "/", pretok.O200k},
		{"after a space before a letter: the optional space", "a ", "b", pretok.GPT2},
		{"contraction after a letter, case-folded", "I", "'LL", pretok.O200k},
	} {
		text, p := tc.left+tc.right, len(tc.left)
		for _, pt := range patterns {
			if pretok.New(c, pt.p).CanCut(text, p) {
				t.Errorf("%s: CanCut(%q|%q) = true for %s", tc.why, tc.left, tc.right, pt.name)
			}
		}
		if ok, _ := cutHolds(pretok.New(c, tc.breaks), text, p); ok {
			t.Errorf("%s: %q|%q is not a counterexample: the cut keeps the pieces", tc.why, tc.left, tc.right)
		}
	}
}

// TestCanCutAccepts holds the cut points CanCut exists for.
func TestCanCutAccepts(t *testing.T) {
	t.Parallel()

	c := newClasses(t)
	for _, tc := range []struct{ left, right string }{
		{"word", " word"},  // rule L and S
		{"word", ", then"}, // rule L
		{"word", "\n\nx"},  // rule L: a newline after a letter
		{"中文", "，中文"},      // rule L: CJK then punctuation
		{"key", "\": 1"},   // rule L: JSON
		{"abc", "123"},     // rule L: letters then digits
		{"123", ",456"},    // rule N
		{"123", "\n456"},   // rule N
		{"123", "abc"},     // rule N
		{"x!", " y"},       // rule S after punctuation
		{"f()", " {"},      // rule S
		{"<|endoftext|>", " x"},
	} {
		text, p := tc.left+tc.right, len(tc.left)
		for _, pt := range patterns {
			s := pretok.New(c, pt.p)
			if !s.CanCut(text, p) {
				t.Errorf("CanCut(%q|%q) = false for %s", tc.left, tc.right, pt.name)
			}
			if ok, why := cutHolds(s, text, p); !ok {
				t.Errorf("%s: %q|%q: %s", pt.name, tc.left, tc.right, why)
			}
		}
	}
	// Never at the ends, never inside a character, never next to invalid
	// UTF-8.
	s := pretok.New(c, pretok.O200k)
	for _, tc := range []struct {
		text string
		p    int
	}{{"a b", 0}, {"a b", 3}, {"中 ", 1}, {"中 ", 2}, {"a\xff ", 2}, {"\xe4\xb8 ", 2}, {"a\xe4\xb8", 1}, {"a", -1}, {"a", 7}} {
		if s.CanCut(tc.text, tc.p) {
			t.Errorf("CanCut(%q, %d) = true", tc.text, tc.p)
		}
	}
}

// TestCanCutCorpus checks every cut point of generated mixed text and of
// the hard cases.
func TestCanCutCorpus(t *testing.T) {
	t.Parallel()

	c := newClasses(t)
	texts := append(testcorpus.Atoms(3, 2000, 16), testcorpus.Mixed(4, 20_000))
	for _, pt := range patterns {
		s := pretok.New(c, pt.p)
		cuts := 0
		for _, text := range texts {
			cuts += checkCuts(t, s, pt.name, text)
		}
		if cuts < 1000 {
			t.Errorf("%s: only %d cut points in the corpus", pt.name, cuts)
		}
	}
}

// checkCuts checks every position CanCut accepts in text and returns how
// many it accepted.
func checkCuts(t *testing.T, s pretok.Splitter, name, text string) int {
	t.Helper()
	n := 0
	for p := range len(text) {
		if !s.CanCut(text, p) {
			continue
		}
		n++
		if ok, why := cutHolds(s, text, p); !ok {
			t.Fatalf("%s: CanCut(%q, %d) = true, but %s", name, text, p, why)
		}
	}
	return n
}

// FuzzCanCut checks that CanCut never accepts a position where the
// pre-tokenization of any pattern would change: a piece spanning the cut, or
// halves that split differently from the whole.
func FuzzCanCut(f *testing.F) {
	for _, s := range testcorpus.Atoms(5, 64, 12) {
		f.Add(s)
	}
	f.Add("x\n\ny don't 1234 (word) a   b e\u0301 中文，中文 <|fim_prefix|>")
	c, err := pretok.NewClasses()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, text string) {
		text = strings.ToValidUTF8(text, "\uFFFD")
		if len(text) > 4096 {
			text = text[:4096]
			text = strings.ToValidUTF8(text, "")
		}
		for _, pt := range patterns {
			checkCuts(t, pretok.New(c, pt.p), pt.name, text)
		}
	})
}
