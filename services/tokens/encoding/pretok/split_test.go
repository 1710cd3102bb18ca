package pretok_test

import (
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/baagent/baagent/services/tokens/encoding/internal/oracle"
	"github.com/baagent/baagent/services/tokens/encoding/internal/testcorpus"
	"github.com/baagent/baagent/services/tokens/encoding/pretok"
)

// encodings maps each encoding to its pattern.
var encodings = map[string]pretok.Pattern{
	"o200k_base": pretok.O200k, "cl100k_base": pretok.Cl100k, "p50k_base": pretok.GPT2, "r50k_base": pretok.GPT2,
}

func newClasses(t testing.TB) *pretok.Classes {
	t.Helper()
	c, err := pretok.NewClasses()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func split(s pretok.Splitter, text string) []string {
	var out []string
	for i := 0; i < len(text); {
		j := s.Next(text, i)
		out = append(out, text[i:j])
		i = j
	}
	return out
}

// compare checks the splitter of name against the regular-expression oracle
// on text and reports the first difference.
func compare(t *testing.T, c *pretok.Classes, name, text string) bool {
	t.Helper()
	o, err := oracle.Get(name)
	if err != nil {
		t.Fatal(err)
	}
	want, err := o.Split(text)
	if err != nil {
		t.Fatal(err)
	}
	got := split(pretok.New(c, encodings[name]), text)
	if slices.Equal(got, want) {
		return true
	}
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			t.Errorf("%s: %q: piece %d: got %q, want %q", name, text, i, got[i], want[i])
			return false
		}
	}
	t.Errorf("%s: %q: got %d pieces, want %d", name, text, len(got), len(want))
	return false
}

// TestSplitMatchesRegexp compares every pattern with the regular-expression
// engine on the hard cases and on generated mixed text.
func TestSplitMatchesRegexp(t *testing.T) {
	t.Parallel()

	c := newClasses(t)
	texts := testcorpus.Atoms(1, 3000, 24)
	texts = append(texts, testcorpus.Mixed(2, 200_000), "", " ", "\n \n", "  \n\t x", "a  ", "'s", "''s", "A'LL", "dON'T",
		strings.Repeat(" ", 1000)+"x", strings.Repeat("1", 100), "\u0301A.", "\u0301\u0301a", "x\u0301", " \u0301", "\n\u0301A")
	for name := range encodings {
		fails := 0
		for _, text := range texts {
			if !compare(t, c, name, text) {
				if fails++; fails > 10 {
					t.Fatalf("%s: too many differences", name)
				}
			}
		}
	}
}

// TestNewCharactersAreLetters: characters Unicode 16.0 added (after Go's
// tables) split as letters and digits, as in tiktoken; the test is honest
// about which tables it runs against.
func TestNewCharactersAreLetters(t *testing.T) {
	t.Parallel()

	c := newClasses(t)
	if unicode.Version != pretok.UnicodeGoVersion {
		t.Fatalf("Go's unicode tables are %s, unicode16.go was generated against %s: regenerate it with internal/ucdgen", unicode.Version, pretok.UnicodeGoVersion)
	}
	s := pretok.New(c, pretok.Cl100k)
	for _, tc := range []struct{ text, want string }{
		{" \U0002EBF0\U0002EBF1", "letters"}, // CJK Extension I (16.0... 15.1)
		{" \U00016D40\U00016D41", "letters"}, // Kirat Rai (16.0)
		{"\U000116D0\U000116D1\U000116D2\U000116D3", "digits"},
		{" \U00016EA0\U00016EA1", "unassigned"}, // Beria Erfe (17.0): unassigned for tiktoken
	} {
		got := split(s, tc.text)
		switch tc.want {
		case "letters":
			if len(got) != 1 {
				t.Errorf("%q split %q, want one letter piece", tc.text, got)
			}
		case "digits":
			if len(got) != 2 || utf8.RuneCountInString(got[0]) != 3 {
				t.Errorf("%q split %q, want digits in groups of three", tc.text, got)
			}
		case "unassigned":
			if len(got) != 1 || c.IsLetter('\U00016EA0') {
				t.Errorf("%q split %q, want one non-letter piece", tc.text, got)
			}
		}
	}
}

// FuzzSplit compares every pattern with the regular-expression engine on
// arbitrary valid UTF-8, and checks that the pieces cover the text.
func FuzzSplit(f *testing.F) {
	c := newClasses(f)
	for _, s := range testcorpus.Atoms(3, 50, 12) {
		f.Add(s)
	}
	f.Add(testcorpus.Mixed(4, 2000))
	f.Fuzz(func(t *testing.T, text string) {
		if !utf8.ValidString(text) {
			text = strings.ToValidUTF8(text, "\ufffd")
		}
		for name := range encodings {
			if got := split(pretok.New(c, encodings[name]), text); strings.Join(got, "") != text {
				t.Fatalf("%s: pieces %q do not cover %q", name, got, text)
			}
			compare(t, c, name, text)
		}
	})
}
