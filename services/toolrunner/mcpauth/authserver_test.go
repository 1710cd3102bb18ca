package mcpauth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// testAS is an OAuth 2.1 authorization server for the tests: RFC 8414
// metadata, RFC 7591 registration, authorization code with mandatory PKCE
// S256 and an RFC 8707 resource, refresh with rotation, RFC 7009
// revocation. Consent is granted automatically, as by a user clicking
// "allow". It checks every request the way a real server must, so a client
// bug (wrong verifier, wrong redirect, reused code) fails the test.
type testAS struct {
	srv *httptest.Server
	ttl time.Duration // access token lifetime

	mu       sync.Mutex
	clients  map[string]asClient
	codes    map[string]asCode
	access   map[string]asToken
	refresh  map[string]asToken
	counts   map[string]int // requests per endpoint
	lastAuth url.Values
}

type asClient struct {
	secret   string
	redirect []string
}

type asCode struct {
	client, redirect, challenge, resource, scope string
}

type asToken struct {
	client, resource, scope, refresh string
	expires                          time.Time
}

func newTestAS(t *testing.T, ttl time.Duration) *testAS {
	as := &testAS{ttl: ttl, clients: map[string]asClient{}, codes: map[string]asCode{},
		access: map[string]asToken{}, refresh: map[string]asToken{}, counts: map[string]int{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", as.metadata)
	mux.HandleFunc("POST /register", as.register)
	mux.HandleFunc("GET /authorize", as.authorize)
	mux.HandleFunc("POST /token", as.token)
	mux.HandleFunc("POST /revoke", as.revoke)
	as.srv = httptest.NewServer(mux)
	t.Cleanup(as.srv.Close)
	return as
}

func (as *testAS) count(ep string) int {
	as.mu.Lock()
	defer as.mu.Unlock()
	return as.counts[ep]
}

func (as *testAS) hit(ep string) {
	as.mu.Lock()
	as.counts[ep]++
	as.mu.Unlock()
}

func randToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func oauthErr(w http.ResponseWriter, code int, e string) {
	writeJSON(w, code, map[string]string{"error": e})
}

func (as *testAS) metadata(w http.ResponseWriter, _ *http.Request) {
	u := as.srv.URL
	writeJSON(w, 200, map[string]any{
		"issuer": u, "authorization_endpoint": u + "/authorize", "token_endpoint": u + "/token",
		"registration_endpoint": u + "/register", "revocation_endpoint": u + "/revoke",
		"response_types_supported":              []string{"code"},
		"grant_types_supported":                 []string{"authorization_code", "refresh_token"},
		"code_challenge_methods_supported":      []string{"S256"},
		"token_endpoint_auth_methods_supported": []string{"client_secret_basic", "none"},
	})
}

func (as *testAS) register(w http.ResponseWriter, r *http.Request) {
	as.hit("register")
	var md oauthex.ClientRegistrationMetadata
	if err := json.NewDecoder(r.Body).Decode(&md); err != nil || len(md.RedirectURIs) == 0 {
		writeJSON(w, 400, map[string]string{"error": "invalid_client_metadata"})
		return
	}
	id, secret := randToken(), randToken()
	as.mu.Lock()
	as.clients[id] = asClient{secret: secret, redirect: md.RedirectURIs}
	as.mu.Unlock()
	writeJSON(w, 201, map[string]any{"client_id": id, "client_secret": secret,
		"redirect_uris": md.RedirectURIs, "token_endpoint_auth_method": "client_secret_basic"})
}

func (as *testAS) authorize(w http.ResponseWriter, r *http.Request) {
	as.hit("authorize")
	q := r.URL.Query()
	as.mu.Lock()
	defer as.mu.Unlock()
	as.lastAuth = q
	c, ok := as.clients[q.Get("client_id")]
	redirect := q.Get("redirect_uri")
	if !ok || len(c.redirect) == 0 || c.redirect[0] != redirect {
		http.Error(w, "unknown client or redirect", 400)
		return
	}
	if q.Get("response_type") != "code" || q.Get("code_challenge_method") != "S256" ||
		q.Get("code_challenge") == "" || q.Get("resource") == "" || q.Get("state") == "" {
		http.Error(w, "bad authorization request", 400)
		return
	}
	code := randToken()
	as.codes[code] = asCode{client: q.Get("client_id"), redirect: redirect,
		challenge: q.Get("code_challenge"), resource: q.Get("resource"), scope: q.Get("scope")}
	to, _ := url.Parse(redirect)
	v := to.Query()
	v.Set("code", code)
	v.Set("state", q.Get("state"))
	to.RawQuery = v.Encode()
	http.Redirect(w, r, to.String(), http.StatusFound)
}

func (as *testAS) clientAuth(r *http.Request) (string, bool) {
	id, secret, ok := r.BasicAuth()
	if !ok {
		return "", false
	}
	id, _ = url.QueryUnescape(id)
	secret, _ = url.QueryUnescape(secret)
	c, known := as.clients[id]
	return id, known && c.secret == secret
}

func (as *testAS) issue(w http.ResponseWriter, client, resource, scope string) {
	at, rt := randToken(), randToken()
	exp := time.Now().Add(as.ttl)
	as.access[at] = asToken{client: client, resource: resource, scope: scope, refresh: rt, expires: exp}
	as.refresh[rt] = asToken{client: client, resource: resource, scope: scope}
	writeJSON(w, 200, map[string]any{"access_token": at, "token_type": "Bearer",
		"expires_in": int(as.ttl / time.Second), "refresh_token": rt, "scope": scope})
}

func (as *testAS) token(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		oauthErr(w, 400, "invalid_request")
		return
	}
	as.hit("token:" + r.PostForm.Get("grant_type"))
	as.mu.Lock()
	defer as.mu.Unlock()
	client, ok := as.clientAuth(r)
	if !ok {
		oauthErr(w, 401, "invalid_client")
		return
	}
	switch r.PostForm.Get("grant_type") {
	case "authorization_code":
		code := r.PostForm.Get("code")
		c, ok := as.codes[code]
		delete(as.codes, code) // single-use
		sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
		if !ok || c.client != client || c.redirect != r.PostForm.Get("redirect_uri") ||
			base64.RawURLEncoding.EncodeToString(sum[:]) != c.challenge ||
			r.PostForm.Get("resource") != c.resource {
			oauthErr(w, 400, "invalid_grant")
			return
		}
		as.issue(w, client, c.resource, c.scope)
	case "refresh_token":
		rt := r.PostForm.Get("refresh_token")
		g, ok := as.refresh[rt]
		if !ok || g.client != client {
			oauthErr(w, 400, "invalid_grant")
			return
		}
		delete(as.refresh, rt) // rotation
		as.issue(w, client, g.resource, g.scope)
	default:
		oauthErr(w, 400, "unsupported_grant_type")
	}
}

func (as *testAS) revoke(w http.ResponseWriter, r *http.Request) {
	as.hit("revoke")
	if err := r.ParseForm(); err != nil {
		oauthErr(w, 400, "invalid_request")
		return
	}
	as.mu.Lock()
	defer as.mu.Unlock()
	if _, ok := as.clientAuth(r); !ok {
		oauthErr(w, 401, "invalid_client")
		return
	}
	tok := r.PostForm.Get("token")
	delete(as.refresh, tok)
	delete(as.access, tok)
	for at, a := range as.access {
		if a.refresh == tok {
			delete(as.access, at)
		}
	}
	w.WriteHeader(200)
}

// verify is the MCP server's token verifier: the token must be live and
// issued for resource.
func (as *testAS) verify(resource string) auth.TokenVerifier {
	return func(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		as.mu.Lock()
		defer as.mu.Unlock()
		a, ok := as.access[token]
		if !ok || a.resource != resource || !time.Now().Before(a.expires) {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{Expiration: a.expires, UserID: a.client}, nil
	}
}

// newProtectedMCP serves an MCP server (official Go SDK) at /mcp behind the
// SDK's bearer-token middleware, with its RFC 9728 metadata naming as.
func newProtectedMCP(t *testing.T, as *testAS) string {
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	resource := srv.URL + "/mcp"
	s := mcp.NewServer(&mcp.Implementation{Name: "protected", Version: "1.0.0"}, nil)
	type in struct {
		Text string `json:"text"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "echoes text"},
		func(ctx context.Context, req *mcp.CallToolRequest, a in) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo: " + a.Text}}}, nil, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	prmURL := srv.URL + "/.well-known/oauth-protected-resource/mcp"
	mux.Handle("/mcp", auth.RequireBearerToken(as.verify(resource), &auth.RequireBearerTokenOptions{ResourceMetadataURL: prmURL})(h))
	mux.Handle("/.well-known/oauth-protected-resource/mcp", auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
		Resource: resource, AuthorizationServers: []string{as.srv.URL}, ScopesSupported: []string{"tools"},
	}))
	return resource
}
