// Package encoding holds the byte-pair encodings of OpenAI's tiktoken
// (o200k_base, cl100k_base, p50k_base, r50k_base) behind a small [Encoder]
// interface, so that the engine doing the work can be replaced without
// touching the service.
//
// Every encoder produces exactly the token ids of OpenAI's tiktoken. Text that
// looks like a special token (`<|endoftext|>`) is ordinary text unless the
// caller allows special tokens, as tiktoken's encode_ordinary and
// encode(text, disallowed_special=()) do; with allowSpecial it becomes the
// special token, as encode(text, allowed_special="all") does.
//
// The vocabularies are compiled into the binary: nothing is downloaded.
package encoding

import (
	"errors"
	"fmt"
	"slices"

	"github.com/baagent/baagent/services/tokens/encoding/pretok"
)

// Names of the supported encodings.
const (
	O200kBase  = "o200k_base"
	Cl100kBase = "cl100k_base"
	P50kBase   = "p50k_base"
	R50kBase   = "r50k_base"
)

// Names lists the supported encodings, newest first.
func Names() []string {
	return []string{O200kBase, Cl100kBase, P50kBase, R50kBase}
}

// Known reports whether name is a supported encoding.
func Known(name string) bool {
	return slices.Contains(Names(), name)
}

// ErrUnknownEncoding is returned by [Set.Get] for a name that is not one of
// [Names].
var ErrUnknownEncoding = errors.New("unknown encoding")

// ErrInvalidToken is returned by [Encoder.Decode] for an id that is not in
// the encoding's vocabulary.
var ErrInvalidToken = errors.New("invalid token id")

// Encoder turns text into token ids and back. Implementations are safe for
// concurrent use.
type Encoder interface {
	// Name is the encoding name, such as "cl100k_base".
	Name() string
	// Encode returns the token ids of text. Special-token text is encoded as
	// the special token only when allowSpecial is true. Invalid UTF-8 is
	// encoded as if each maximal invalid subsequence were U+FFFD, as Python
	// would decode the bytes with errors="replace".
	Encode(text string, allowSpecial bool) ([]uint32, error)
	// Count returns len(Encode(text, allowSpecial)) without building the ids.
	Count(text string, allowSpecial bool) (int, error)
	// Decode returns the bytes of ids. The bytes need not be valid UTF-8: a
	// token may hold part of a multi-byte character. An unknown id fails with
	// an error wrapping [ErrInvalidToken].
	Decode(ids []uint32) ([]byte, error)
}

// Set is the supported encoders, built once. It is immutable and safe for
// concurrent use.
type Set struct {
	byName map[string]Encoder
}

// NewSet builds the encoders of every name in [Names], loading their
// vocabularies from the rank files compiled in (tens of milliseconds for all
// four; see BenchmarkNewSet).
func NewSet() (*Set, error) {
	classes, err := pretok.NewClasses()
	if err != nil {
		return nil, err
	}
	s := &Set{byName: make(map[string]Encoder, len(Names()))}
	for _, name := range Names() {
		e, err := newEngine(name, classes)
		if err != nil {
			return nil, err
		}
		s.byName[name] = e
	}
	return s, nil
}

// Get returns the encoder called name.
func (s *Set) Get(name string) (Encoder, error) {
	if e, ok := s.byName[name]; ok {
		return e, nil
	}
	return nil, fmt.Errorf("%w %q (supported: %v)", ErrUnknownEncoding, name, Names())
}
