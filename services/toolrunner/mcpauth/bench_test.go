package mcpauth

import (
	"context"
	"testing"
	"time"
)

// BenchmarkToken is the per-call cost of getting a tenant's valid access
// token: one KV read, AES-GCM open and JSON decode (no refresh).
func BenchmarkToken(b *testing.B) {
	e := newEnvB(b)
	ctx := context.Background()
	g := &Grant{ClientID: "c", TokenURL: "http://as/token", Resource: "http://rs/mcp", AccessToken: "access", RefreshToken: "refresh", Expiry: time.Now().Add(time.Hour)}
	if err := e.PutGrant(ctx, "acme", "linear", g); err != nil {
		b.Fatal(err)
	}
	f := &Flow{Store: e}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := f.Token(ctx, "acme", "linear"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSealOpen is sealing and opening one grant-sized record.
func BenchmarkSealOpen(b *testing.B) {
	s, err := newSealer(make([]byte, KeySize))
	if err != nil {
		b.Fatal(err)
	}
	plain := make([]byte, 512)
	b.ReportAllocs()
	b.SetBytes(int64(len(plain)))
	for b.Loop() {
		sealed, err := s.seal(plain, "g.YWNtZQ.bGluZWFy")
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.open(sealed, "g.YWNtZQ.bGluZWFy"); err != nil {
			b.Fatal(err)
		}
	}
}
