package encoding

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestDifferentialTiktoken compares Encode with OpenAI's tiktoken on random
// text mixing the pre-tokenizer's hard cases. It runs only where
// BAAGENT_TIKTOKEN_SCRIPT names a Node.js script that reads a JSON array of
// strings on stdin and writes, per encoding name, {"ordinary": [[ids]],
// "special": [[ids]]} from tiktoken's encode_ordinary and encode(text, "all").
func TestDifferentialTiktoken(t *testing.T) {
	t.Parallel()

	script := os.Getenv("BAAGENT_TIKTOKEN_SCRIPT")
	if script == "" {
		t.Skip("BAAGENT_TIKTOKEN_SCRIPT not set")
	}
	seed := uint64(1)
	rng := rand.New(rand.NewPCG(seed, 7))
	atoms := []string{
		"a", "B", "hello", "World", "THE", "ǅ", "ʰ", "ſ", "K", "é", "e\u0301", "ß", "İ", "ﬀ",
		"'s", "'S", "'t", "'RE", "'ve", "'M", "'ll", "'D", "'ſ", "'K", "’s", "'", "''",
		"0", "12", "345", "6789", "٣", "１２", "²", "Ⅻ", "½",
		" ", "  ", "\t", "\n", "\r", "\r\n", "\v", "\f", "\u00a0", "\u0085", "\u2028", "\u3000", "\u200b", "\u200d", "\ufeff",
		"中文", "日本語", "カタカナ", "한국어", "Ёжик", "ελληνικά", "עברית", "العربية", "हिन्दी", "ไทย",
		"😀", "👍🏽", "👨‍👩‍👧", "🏳️‍🌈", "❤️", "\U0001F9D1\u200d\U0001F4BB",
		".", ",", "!", "?", "...", "/", "//", "/*", "{", "}", "()", "=>", "<|", "|>", "<|endoftext|>", "<|endofprompt|>", "<|fim_prefix|>", "<|fim_middle|>",

		"\u0300", "\u0903", "\u20dd",
		// New in Unicode 15.1 and 16.0 (letters, marks, digits for tiktoken),
		// and in 17.0 (unassigned for tiktoken 1.0.22).
		"\U0002EBF0", "\U00010D4A", "\U00016D40", "\u1C89", "\uA7CB", "\U00011390", "\U000116D0", "\U00010D40", "\U0001E5F1",
		"\U00016EA0", "\U00010940", "\U00011DB0",
	}
	var texts []string
	for range 4000 {
		var b strings.Builder
		for n := 1 + rng.IntN(24); n > 0; n-- {
			b.WriteString(atoms[rng.IntN(len(atoms))])
		}
		texts = append(texts, b.String())
	}
	for _, v := range referenceVectors {
		texts = append(texts, v.text)
	}
	in, _ := json.Marshal(texts)
	cmd := exec.Command("node", script)
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", script, err, stderr.String())
	}
	var want map[string]struct{ Ordinary, Special [][]uint32 }
	if err := json.Unmarshal(out, &want); err != nil {
		t.Fatal(err)
	}
	set := newTestSet(t)
	fails := 0
	for _, name := range Names() {
		e, _ := set.Get(name)
		for i, text := range texts {
			if !utf8.ValidString(text) {
				t.Fatalf("generated invalid UTF-8 %q", text)
			}
			for _, allow := range []bool{false, true} {
				w := want[name].Ordinary[i]
				if allow {
					w = want[name].Special[i]
				}
				got, _ := e.Encode(text, allow)
				if !slices.Equal(got, w) {
					fails++
					if fails < 30 {
						t.Errorf("%s allow=%v %q\n got %v\nwant %v", name, allow, text, got, w)
					}
				}
			}
		}
	}
	if fails > 0 {
		t.Errorf("%d mismatches", fails)
	}
}
