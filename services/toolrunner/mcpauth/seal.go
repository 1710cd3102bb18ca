// Package mcpauth keeps the OAuth 2.0 grants that let the toolrunner call
// hosted MCP servers (GitHub, Linear, Atlassian…) on behalf of a tenant.
//
// A [Flow] runs the MCP authorization flow: it discovers the authorization
// server of an MCP server (RFC 9728 protected-resource metadata, then RFC
// 8414 authorization-server metadata), registers a client (RFC 7591) when the
// entry configures none, and builds an authorization-code URL protected by
// PKCE (S256). The callback's code and state are exchanged for tokens, which
// a [Store] keeps per tenant and server in a JetStream KV bucket, sealed with
// AES-256-GCM so that the bucket never holds a token in the clear.
// [Flow.Token] returns a valid access token, refreshing it shortly before it
// expires; [Flow.Revoke] revokes it at the authorization server and forgets
// it.
package mcpauth

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
)

// KeySize is the size of the sealing key: AES-256.
const KeySize = 32

// maxKeyFileBytes bounds what LoadKey reads.
const maxKeyFileBytes = 4096

// LoadKey reads the sealing key from path. The file holds the 32 key bytes
// raw, or as 64 hex digits, or as standard or URL base64; surrounding white
// space is ignored. 32 printable characters are refused rather than taken
// as raw bytes. Any other length is refused so that a truncated or wrong
// file is never used as a weaker key.
func LoadKey(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("mcp oauth key file: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxKeyFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("mcp oauth key file %s: %w", path, err)
	}
	if len(b) > maxKeyFileBytes {
		return nil, fmt.Errorf("mcp oauth key file %s: larger than %d bytes", path, maxKeyFileBytes)
	}
	return ParseKey(b)
}

// ParseKey decodes a key file's content (see LoadKey).
func ParseKey(b []byte) ([]byte, error) {
	// 32 raw bytes are a key unless they are all printable: a random key
	// is printable with odds of about 1e-14, while 32 characters of text
	// are a mistake (a 16-byte key in hex, a passphrase) and must not be
	// used as key material.
	if len(b) == KeySize && !printable(b) {
		return bytes.Clone(b), nil
	}
	s := string(bytes.TrimSpace(b))
	if len(s) == 2*KeySize {
		if k, err := hex.DecodeString(s); err == nil {
			return k, nil
		}
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
		if k, err := enc.DecodeString(s); err == nil && len(k) == KeySize {
			return k, nil
		}
	}
	return nil, fmt.Errorf("mcp oauth key must be %d bytes (raw, 64 hex digits or base64), got %d bytes", KeySize, len(b))
}

func printable(b []byte) bool {
	for _, c := range b {
		if c < 0x20 || c > 0x7e {
			return false
		}
	}
	return true
}

// sealer encrypts records with AES-256-GCM. The additional data is the
// record's KV key, so a sealed value copied under another tenant's key does
// not open.
type sealer struct{ aead cipher.AEAD }

func newSealer(key []byte) (*sealer, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("mcp oauth key must be %d bytes, got %d", KeySize, len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &sealer{aead: aead}, nil
}

// sealVersion prefixes every sealed value so the format can change.
const sealVersion = 1

// seal returns version || nonce || ciphertext.
func (s *sealer) seal(plain []byte, aad string) ([]byte, error) {
	ns := s.aead.NonceSize()
	out := make([]byte, 1+ns, 1+ns+len(plain)+s.aead.Overhead())
	out[0] = sealVersion
	if _, err := rand.Read(out[1 : 1+ns]); err != nil {
		return nil, err
	}
	return s.aead.Seal(out, out[1:1+ns], plain, []byte(aad)), nil
}

// errSealed is returned for a value that does not open with this key.
var errSealed = errors.New("sealed record does not open (wrong key or tampered)")

func (s *sealer) open(sealed []byte, aad string) ([]byte, error) {
	ns := s.aead.NonceSize()
	if len(sealed) < 1+ns+s.aead.Overhead() || sealed[0] != sealVersion {
		return nil, errSealed
	}
	plain, err := s.aead.Open(nil, sealed[1:1+ns], sealed[1+ns:], []byte(aad))
	if err != nil {
		return nil, errSealed
	}
	return plain, nil
}
