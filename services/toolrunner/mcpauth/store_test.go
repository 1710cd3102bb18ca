package mcpauth

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestGrantsAreSealedAndBoundToTheirKey(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	g := &Grant{ClientID: "c", TokenURL: "http://as/token", Resource: "http://rs/mcp", AccessToken: "SECRET-ACCESS", RefreshToken: "SECRET-REFRESH", Expiry: time.Now().Add(time.Hour)}
	if err := e.store.PutGrant(ctx, "acme", "linear", g); err != nil {
		t.Fatal(err)
	}
	raw, err := e.kv.Get(ctx, grantKey("acme", "linear"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(raw.Value(), []byte("SECRET")) {
		t.Fatal("the bucket holds a token in the clear")
	}
	// The same bytes under another tenant's key do not open.
	if _, err := e.kv.Put(ctx, grantKey("evil", "linear"), raw.Value()); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.store.Grant(ctx, "evil", "linear"); !errors.Is(err, errSealed) {
		t.Fatalf("copied grant: %v, want errSealed", err)
	}
	// Another key does not open it either.
	other, err := NewStore(e.kv, e.store.states, testKey(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := other.Grant(ctx, "acme", "linear"); !errors.Is(err, errSealed) {
		t.Fatalf("wrong key: %v, want errSealed", err)
	}
	got, _, err := e.store.Grant(ctx, "acme", "linear")
	if err != nil || got.AccessToken != "SECRET-ACCESS" {
		t.Fatalf("grant = %+v, %v", got, err)
	}
}

func TestKeysDoNotCollide(t *testing.T) {
	if grantKey("a.b", "c") == grantKey("a", "b.c") {
		t.Fatal("tenant/server pairs collide")
	}
}

func TestParseKey(t *testing.T) {
	raw := bytes.Repeat([]byte{7}, KeySize)
	for name, in := range map[string][]byte{
		"raw":    raw,
		"hex":    []byte(hex.EncodeToString(raw) + "\n"),
		"base64": []byte(base64.StdEncoding.EncodeToString(raw) + "\n"),
	} {
		k, err := ParseKey(in)
		if err != nil || !bytes.Equal(k, raw) {
			t.Errorf("%s: %x, %v", name, k, err)
		}
	}
	for name, in := range map[string][]byte{
		"short":      raw[:16],
		"short hex":  []byte(hex.EncodeToString(raw[:16])),
		"empty":      nil,
		"not base64": []byte("this is not a key at all, nope!!"),
	} {
		if _, err := ParseKey(in); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "key")
	if err := os.WriteFile(p, []byte(hex.EncodeToString(raw)), 0o600); err != nil {
		t.Fatal(err)
	}
	if k, err := LoadKey(p); err != nil || !bytes.Equal(k, raw) {
		t.Fatalf("LoadKey = %x, %v", k, err)
	}
	if _, err := LoadKey(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("missing key file accepted")
	}
}

func TestParseState(t *testing.T) {
	s, err := newState()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParseState(s); err != nil {
		t.Fatalf("own state refused: %v", err)
	}
	for _, bad := range []string{"", "short", s + "A", s[:len(s)-1] + "!", "s." + s[2:]} {
		if _, err := ParseState(bad); !errors.Is(err, ErrBadState) {
			t.Errorf("ParseState(%q) = %v", bad, err)
		}
	}
}

func TestDropRefusedGrantKeepsANewerGrant(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	put := func(tok string) {
		t.Helper()
		g := &Grant{ClientID: "c", TokenURL: "http://as/token", Resource: "http://rs/mcp", AccessToken: tok, Expiry: time.Now().Add(time.Hour)}
		if err := e.store.PutGrant(ctx, "acme", "linear", g); err != nil {
			t.Fatal(err)
		}
	}
	put("old")
	put("new") // the tenant authorized again after "old" was sent
	if dropped, err := e.store.DropRefusedGrant(ctx, "acme", "linear", "old"); err != nil || dropped {
		t.Fatalf("DropRefusedGrant(old) = %v, %v; want the newer grant kept", dropped, err)
	}
	if g, _, err := e.store.Grant(ctx, "acme", "linear"); err != nil || g.AccessToken != "new" {
		t.Fatalf("grant after a stale refusal: %v, %v", g, err)
	}
	if dropped, err := e.store.DropRefusedGrant(ctx, "acme", "linear", "new"); err != nil || !dropped {
		t.Fatalf("DropRefusedGrant(new) = %v, %v; want dropped", dropped, err)
	}
	if _, _, err := e.store.Grant(ctx, "acme", "linear"); !errors.Is(err, ErrNotAuthorized) {
		t.Fatalf("grant after drop: %v, want ErrNotAuthorized", err)
	}
	if dropped, err := e.store.DropRefusedGrant(ctx, "acme", "linear", "new"); err != nil || dropped {
		t.Fatalf("second drop = %v, %v; want nothing to drop", dropped, err)
	}
}
