package bpe_test

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"strconv"
	"testing"

	"github.com/baagent/baagent/services/tokens/encoding/bpe"
	"github.com/baagent/baagent/services/tokens/encoding/internal/oracle"
)

// publishedSHA256 are the expected_hash values of tiktoken_ext/openai_public.py
// for the .tiktoken files at openaipublic.blob.core.windows.net/encodings/.
var publishedSHA256 = map[string]string{
	"o200k_base":  "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
	"cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
	"p50k_base":   "94b5ca7dff4d00767bc256fdd1b27e5b17361d7b8a5f968547f9f23eb70d2069",
	"r50k_base":   "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930",
}

var names = []string{"o200k_base", "cl100k_base", "p50k_base", "r50k_base"}

func load(t testing.TB, name string) *bpe.Vocabulary {
	t.Helper()
	v, err := bpe.Load(name)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestRankFilesMatchPublishedDigests re-serialises each embedded vocabulary
// as OpenAI's .tiktoken file (base64 token, space, rank, newline, in rank
// order) and checks its SHA-256 against the published one: the embedded
// data is exactly OpenAI's.
func TestRankFilesMatchPublishedDigests(t *testing.T) {
	t.Parallel()

	for _, name := range names {
		v := load(t, name)
		h := sha256.New()
		var line []byte
		for id := range uint32(v.Len()) {
			if !v.Valid(id) {
				continue
			}
			line = base64.StdEncoding.AppendEncode(line[:0], []byte(v.Token(id)))
			line = append(line, ' ')
			line = strconv.AppendUint(line, uint64(id), 10)
			line = append(line, '\n')
			h.Write(line)
		}
		if got := hex.EncodeToString(h.Sum(nil)); got != publishedSHA256[name] {
			t.Errorf("%s: SHA-256 of the re-serialised rank file is %s, OpenAI publishes %s", name, got, publishedSHA256[name])
		}
	}
}

// TestVocabularyMatchesLibrary: every token of the reference library has the
// same rank here, and the counts agree.
func TestVocabularyMatchesLibrary(t *testing.T) {
	t.Parallel()

	for _, name := range names {
		v := load(t, name)
		o, err := oracle.Get(name)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for id := range uint32(v.Len()) {
			if !v.Valid(id) {
				continue
			}
			n++
			tok := v.Token(id)
			if r, ok := o.Rank(tok); !ok || r != id {
				t.Fatalf("%s: token %q has rank %d here, %d (%v) in the library", name, tok, id, r, ok)
			}
			if r := v.Rank(tok); r != id {
				t.Fatalf("%s: Rank(%q) = %d, want %d", name, tok, r, id)
			}
		}
		if n != o.Ranks() {
			t.Errorf("%s: %d tokens here, %d in the library", name, n, o.Ranks())
		}
		for _, s := range []string{"", "not a token at all, surely", string(make([]byte, 300))} {
			if r := v.Rank(s); r != bpe.NoRank {
				t.Errorf("%s: Rank(%q) = %d, want NoRank", name, s, r)
			}
		}
	}
}
