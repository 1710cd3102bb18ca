package encoding

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"
)

func TestNamesAndGet(t *testing.T) {
	t.Parallel()

	set := newTestSet(t)
	for _, name := range Names() {
		if !Known(name) {
			t.Errorf("Known(%q) = false", name)
		}
		e, err := set.Get(name)
		if err != nil || e.Name() != name {
			t.Errorf("Get(%q) = %v, %v", name, e, err)
		}
	}
	if Known("gpt2") {
		t.Error(`Known("gpt2") = true`)
	}
	if _, err := set.Get("p50k_edit"); !errors.Is(err, ErrUnknownEncoding) {
		t.Errorf("Get(p50k_edit) error = %v, want ErrUnknownEncoding", err)
	}
}

func TestDecodeInvalidToken(t *testing.T) {
	t.Parallel()

	set := newTestSet(t)
	e, _ := set.Get(Cl100kBase)
	// 100256 is a hole in cl100k_base; 100257 (<|endoftext|>) is special.
	_, err := e.Decode([]uint32{15339, 100257, 1917, 100256})
	if !errors.Is(err, ErrInvalidToken) || !strings.Contains(err.Error(), "100256 at index 3") {
		t.Fatalf("Decode error = %v, want invalid token 100256 at index 3", err)
	}
	if _, err := e.Decode([]uint32{1 << 31}); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("Decode(huge id) error = %v", err)
	}
	raw, err := e.Decode(nil)
	if err != nil || len(raw) != 0 {
		t.Fatalf("Decode(nil) = %q, %v", raw, err)
	}
}

// TestDecodePartialCharacter: a token may hold part of a character; Decode
// returns the exact bytes.
func TestDecodePartialCharacter(t *testing.T) {
	t.Parallel()

	set := newTestSet(t)
	e, _ := set.Get(R50kBase)
	ids, _ := e.Encode("构", false) // three byte-level tokens in r50k
	if len(ids) < 2 {
		t.Fatalf("want a multi-token character, got %v", ids)
	}
	raw, err := e.Decode(ids[:1])
	if err != nil || len(raw) != 1 || raw[0] != "构"[0] {
		t.Fatalf("Decode(first) = %q, %v", raw, err)
	}
}

func TestReplaceInvalid(t *testing.T) {
	t.Parallel()

	for in, want := range map[string]string{
		"ok":            "ok",
		"\xe2\x82a":     "\ufffda",            // truncated 3-byte sequence: one maximal subpart
		"\xff\xfe":      "\ufffd\ufffd",       // two invalid bytes
		"\xed\xa0\x80":  "\ufffd\ufffd\ufffd", // surrogate: ED A0 is not a valid prefix
		"a\xf0\x9f\x98": "a\ufffd",            // truncated 4-byte emoji
		"\xc3\xa9\xc3":  "é\ufffd",
	} {
		if got := replaceInvalid(in); got != want {
			t.Errorf("replaceInvalid(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestInvalidUTF8 encodes invalid UTF-8 as its replaced form.
func TestInvalidUTF8(t *testing.T) {
	t.Parallel()

	set := newTestSet(t)
	for _, name := range Names() {
		e, _ := set.Get(name)
		got, err := e.Encode("a\xe2\x82b\xff", false)
		want, _ := e.Encode("a\ufffdb\ufffd", false)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("%s: Encode(invalid) = %v, %v; want %v", name, got, err, want)
		}
	}
}

// TestSpecialsNext covers the special-token finder's corners.
func TestSpecialsNext(t *testing.T) {
	t.Parallel()

	s := newSpecials(Cl100kBase)
	for _, c := range []struct {
		text   string
		at, ln int
	}{
		{"", -1, 0},
		{"<|", -1, 0},
		{"<|endoftext", -1, 0},
		{"<|<|endoftext|>", 2, 13},
		{"x <|fim_middle|> <|endoftext|>", 2, 14},
		{"<|unknown|><|endofprompt|>", 11, 15},
	} {
		at, ln, _ := s.next(c.text)
		if at != c.at || (at >= 0 && ln != c.ln) {
			t.Errorf("next(%q) = %d,%d; want %d,%d", c.text, at, ln, c.at, c.ln)
		}
	}
}

// TestConcurrent runs encoders from many goroutines (meaningful under -race).
func TestConcurrent(t *testing.T) {
	t.Parallel()

	set := newTestSet(t)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			e, _ := set.Get(Names()[g%len(Names())])
			for _, v := range referenceVectors {
				got, err := e.Encode(v.text, g%2 == 0)
				if err != nil {
					errs <- err
					return
				}
				if raw, err := e.Decode(got); err != nil || string(raw) != v.text {
					errs <- errors.New("round trip failed for " + v.name)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// FuzzRoundTrip: encoding then decoding gives the input back (its replaced
// form for invalid UTF-8), Count agrees with Encode, and nothing panics.
func FuzzRoundTrip(f *testing.F) {
	set := newTestSet(f)
	for _, v := range referenceVectors {
		f.Add(v.text, false)
	}
	f.Add(specialText, true)
	f.Add("a\xe2\x82b\xff", false)
	f.Add("\n \n\t\n", true)
	f.Fuzz(func(t *testing.T, text string, allowSpecial bool) {
		want := replaceInvalid(text)
		for _, name := range Names() {
			e, _ := set.Get(name)
			ids, err := e.Encode(text, allowSpecial)
			if err != nil {
				t.Fatalf("%s: Encode: %v", name, err)
			}
			n, err := e.Count(text, allowSpecial)
			if err != nil || n != len(ids) {
				t.Fatalf("%s: Count = %d, %v; Encode gave %d ids", name, n, err, len(ids))
			}
			raw, err := e.Decode(ids)
			if err != nil || string(raw) != want {
				t.Fatalf("%s: Decode(Encode(%q)) = %q, %v", name, text, raw, err)
			}
		}
	})
}

// FuzzDecode: any id sequence decodes or fails with ErrInvalidToken, never
// panics; what decodes to valid UTF-8 encodes to ids that decode to the same
// text (BPE need not give the same ids back).
func FuzzDecode(f *testing.F) {
	set := newTestSet(f)
	f.Add([]byte{0, 0, 0, 0})
	f.Add([]byte{0x27, 0x3d, 0x00, 0x00, 0x69, 0x07, 0x00, 0x00}) // 15655, 1897
	f.Add([]byte{0xa1, 0x87, 0x01, 0x00})                         // 100257, <|endoftext|> in cl100k_base
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		ids := make([]uint32, 0, len(data)/4)
		for i := 0; i+4 <= len(data); i += 4 {
			// Keep most ids inside the vocabularies so that decoding succeeds
			// often enough to test the round trip.
			ids = append(ids, (uint32(data[i])|uint32(data[i+1])<<8|uint32(data[i+2])<<16|uint32(data[i+3])<<24)%210_000)
		}
		for _, name := range Names() {
			e, _ := set.Get(name)
			raw, err := e.Decode(ids)
			if err != nil {
				if !errors.Is(err, ErrInvalidToken) {
					t.Fatalf("%s: Decode(%v): %v", name, ids, err)
				}
				continue
			}
			text := string(raw)
			if !utf8.ValidString(text) {
				continue
			}
			again, err := e.Encode(text, true)
			if err != nil {
				t.Fatalf("%s: Encode(%q): %v", name, text, err)
			}
			back, err := e.Decode(again)
			if err != nil || string(back) != text {
				t.Fatalf("%s: Decode(Encode(%q)) = %q, %v", name, text, back, err)
			}
		}
	})
}
