package mcpauth

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
)

// stateBytes is the entropy of a state: 256 bits.
const stateBytes = 32

// stateLen is the length of an encoded state.
var stateLen = base64.RawURLEncoding.EncodedLen(stateBytes)

// ErrBadState is returned for a state that is malformed, unknown, already
// used or expired; the callback cannot tell these apart, and neither may a
// caller probing for states.
var ErrBadState = errors.New("authorization state is invalid, used or expired")

func newState() (string, error) {
	b := make([]byte, stateBytes)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// ParseState checks that s has the shape of a state this package issued (43
// base64url characters encoding 32 bytes). It does not look the state up.
func ParseState(s string) (string, error) {
	if len(s) != stateLen {
		return "", ErrBadState
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) != stateBytes {
		return "", ErrBadState
	}
	// Reject non-canonical encodings (trailing bits set) so one state has
	// one spelling.
	if base64.RawURLEncoding.EncodeToString(b) != s {
		return "", ErrBadState
	}
	return s, nil
}
