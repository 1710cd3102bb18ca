package mcpauth

import (
	"context"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
)

func FuzzParseState(f *testing.F) {
	s, _ := newState()
	f.Add(s)
	f.Add("")
	f.Add(strings.Repeat("A", stateLen))
	f.Add(strings.Repeat("_", stateLen-1) + "-")
	f.Fuzz(func(t *testing.T, in string) {
		got, err := ParseState(in)
		if err != nil {
			return
		}
		b, derr := base64.RawURLEncoding.DecodeString(got)
		if derr != nil || len(b) != stateBytes || got != in {
			t.Fatalf("accepted %q: %v, %d bytes", in, derr, len(b))
		}
		// An accepted state is a valid KV key token.
		if strings.ContainsAny(got, ". *>") {
			t.Fatalf("accepted %q is not a KV key token", in)
		}
	})
}

func FuzzProtectedResourceMetadataURLs(f *testing.F) {
	for _, s := range []string{"https://mcp.linear.app/mcp", "http://127.0.0.1:8080", "https://h/a/b/", "ftp://x", "::", "https://"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		urls, err := ProtectedResourceMetadataURLs(in)
		if err != nil {
			return
		}
		if len(urls) == 0 || len(urls) > 2 {
			t.Fatalf("%q: %d URLs", in, len(urls))
		}
		src, _ := url.Parse(in)
		for _, s := range urls {
			u, err := url.Parse(s)
			if err != nil || u.Host != src.Host || u.Scheme != src.Scheme ||
				!strings.HasPrefix(u.Path, "/.well-known/oauth-protected-resource") {
				t.Fatalf("%q gave %q", in, s)
			}
		}
	})
}

// FuzzDiscoverMetadata serves fuzzed protected-resource and
// authorization-server metadata and checks that discovery never panics and
// never accepts metadata without the endpoints and PKCE it needs.
func FuzzDiscoverMetadata(f *testing.F) {
	f.Add(`{"resource":"RS/mcp","authorization_servers":["AS"]}`,
		`{"issuer":"AS","authorization_endpoint":"AS/a","token_endpoint":"AS/t","response_types_supported":["code"],"code_challenge_methods_supported":["S256"]}`)
	f.Add(`{"resource":"RS/mcp","authorization_servers":[]}`, `{}`)
	f.Add(`{"resource":"RS/mcp","authorization_servers":["javascript:alert(1)"]}`, `null`)
	f.Add(`[]`, `{"issuer":"AS","authorization_endpoint":"javascript:x","token_endpoint":"AS/t","code_challenge_methods_supported":["S256"]}`)
	var prm, asm string
	var base string
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body := asm
		if strings.HasPrefix(r.URL.Path, "/.well-known/oauth-protected-resource") {
			body = prm
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(strings.ReplaceAll(strings.ReplaceAll(body, "RS", base), "AS", base)))
	})
	srv := httptest.NewServer(h)
	defer srv.Close()
	base = srv.URL
	fl := &Flow{HTTPClient: srv.Client()}
	f.Fuzz(func(t *testing.T, p, a string) {
		prm, asm = p, a
		md, err := fl.Discover(context.Background(), srv.URL+"/mcp")
		if err != nil {
			return
		}
		if md.AS.AuthorizationEndpoint == "" || md.AS.TokenEndpoint == "" || !slices.Contains(md.AS.CodeChallengeMethodsSupported, "S256") {
			t.Fatalf("accepted incomplete metadata %+v", md.AS)
		}
		for _, e := range []string{md.AS.AuthorizationEndpoint, md.AS.TokenEndpoint} {
			if u, err := url.Parse(e); err != nil || (u.Scheme != "http" && u.Scheme != "https") {
				t.Fatalf("accepted endpoint %q", e)
			}
		}
	})
}
