package toolrunner

import (
	"context"
	"crypto/rand"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/natsx"
	"github.com/baagent/baagent/internal/testkit/natstest"
	"github.com/baagent/baagent/services/toolrunner/external"
	"github.com/baagent/baagent/services/toolrunner/mcpauth"
)

// oauthMCPEnv is an auth: oauth MCP server (the official SDK's server
// behind its RequireBearerToken middleware) wired into a toolrunner, with
// grants in a real JetStream KV store.
type oauthMCPEnv struct {
	srv    *Server
	flow   *mcpauth.Flow
	url    string
	mu     sync.Mutex
	tokens map[string]bool // access tokens the MCP server accepts
	calls  map[string]int  // token -> tools/call count seen by the server
}

func newOAuthMCPEnv(t testing.TB) *oauthMCPEnv {
	t.Helper()
	ns := natstest.StartNATS(t)
	js, _ := natstest.Connect(t, ns.ClientURL(), t.Name())
	ctx := context.Background()
	kv, err := js.KeyValue(ctx, natsx.BucketMCPOAuth)
	if err != nil {
		t.Fatal(err)
	}
	states, err := js.KeyValue(ctx, natsx.BucketMCPOAuthState)
	if err != nil {
		t.Fatal(err)
	}
	key := make([]byte, mcpauth.KeySize)
	_, _ = rand.Read(key)
	store, err := mcpauth.NewStore(kv, states, key)
	if err != nil {
		t.Fatal(err)
	}
	e := &oauthMCPEnv{flow: &mcpauth.Flow{Store: store}, tokens: map[string]bool{}, calls: map[string]int{}}

	s := mcp.NewServer(&mcp.Implementation{Name: "protected", Version: "1.0.0"}, nil)
	type in struct {
		Text string `json:"text"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "echoes text", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, req *mcp.CallToolRequest, a in) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo: " + a.Text}}}, nil, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	verify := func(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		e.mu.Lock()
		defer e.mu.Unlock()
		if !e.tokens[token] {
			return nil, auth.ErrInvalidToken
		}
		e.calls[token]++
		return &auth.TokenInfo{Expiration: time.Now().Add(time.Hour)}, nil
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", auth.RequireBearerToken(verify, nil)(h))
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	e.url = hs.URL + "/mcp"

	cfg := external.Config{MCPServers: []external.MCPServerConfig{
		{Name: "linear", HTTP: &external.HTTPConfig{URL: e.url}, Auth: external.AuthOAuth},
	}}
	mgr, err := external.New(cfg, external.Options{OAuth: e.flow, Registerer: prometheus.NewRegistry(), OAuthSessions: 2})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Run(runCtx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Manager.Run: %v", err)
		}
	})
	authorized := func(ctx context.Context, tenant, server string) (bool, error) {
		st, err := e.flow.Status(ctx, tenant, server)
		return err == nil && st.Authorized, err
	}
	e.srv, _ = newTestServer(t, func(o *Options) {
		o.Sources = append(o.Sources, mgr.Sources()...)
		o.ServerStatus = func(ctx context.Context, tenant string) []*baagentv1.ExternalServerStatus {
			return mgr.ServerStatus(ctx, tenant, authorized)
		}
	})
	return e
}

// grant stores a grant for tenant whose access token the server accepts
// when valid, as a completed authorization (Flow.Complete) does.
func (e *oauthMCPEnv) grant(t testing.TB, tenant, token string, valid bool) {
	t.Helper()
	e.mu.Lock()
	e.tokens[token] = valid
	e.mu.Unlock()
	g := &mcpauth.Grant{ClientID: "client", TokenURL: "http://127.0.0.1:1/token", Resource: e.url,
		AccessToken: token, TokenType: "Bearer", Expiry: time.Now().Add(time.Hour), UpdatedAt: time.Now()}
	if err := e.flow.Store.PutGrant(context.Background(), tenant, "linear", g); err != nil {
		t.Fatal(err)
	}
}

func (e *oauthMCPEnv) list(t testing.TB, tenant string) (tools []string, needsAuth bool) {
	t.Helper()
	resp, err := e.srv.ListTools(context.Background(), &baagentv1.ListToolsRequest{Tenant: tenant})
	if err != nil {
		t.Fatalf("ListTools: %v", err)
	}
	for _, d := range resp.GetTools() {
		tools = append(tools, d.GetSchema().GetName())
	}
	for _, s := range resp.GetServers() {
		if s.GetName() == "linear" {
			needsAuth = s.GetNeedsAuth()
		}
	}
	return tools, needsAuth
}

func (e *oauthMCPEnv) up(t testing.TB, tenant string) bool {
	t.Helper()
	resp, err := e.srv.ListTools(context.Background(), &baagentv1.ListToolsRequest{Tenant: tenant})
	if err != nil {
		t.Fatalf("ListTools: %v", err)
	}
	for _, s := range resp.GetServers() {
		if s.GetName() == "linear" {
			return s.GetUp()
		}
	}
	t.Fatal("ListTools does not report server linear")
	return false
}

func (e *oauthMCPEnv) call(t testing.TB, tenant string) *baagentv1.ToolExecutionResult {
	t.Helper()
	r := req("mcp__linear__echo", map[string]any{"text": "hi"})
	r.Tenant = tenant
	return mustInvoke(t, e.srv, r)
}

const oauthTool = "mcp__linear__echo"

func TestOAuthMCPServerPerTenant(t *testing.T) {
	e := newOAuthMCPEnv(t)

	// Before authorization: no tools, needs_auth, and a call says how to authorize.
	tools, needs := e.list(t, "acme")
	if slices.Contains(tools, oauthTool) || !needs {
		t.Fatalf("before authorizing: tools %v needs_auth %v, want no %s and needs_auth", tools, needs, oauthTool)
	}
	res := e.call(t, "acme")
	if res.GetErrorCode() != external.CodeAuthRequired ||
		res.GetErrorType() != baagentv1.ToolErrorType_TOOL_ERROR_TYPE_PERMISSION_DENIED ||
		!strings.Contains(res.GetErrorMessage(), "baagentctl mcp authorize linear") {
		t.Fatalf("call before authorizing: %v, want %s", res.GetErrorMessage(), external.CodeAuthRequired)
	}

	// Authorized: acme lists and calls the tool with its own token.
	e.grant(t, "acme", "tok-acme", true)
	tools, needs = e.list(t, "acme")
	if !slices.Contains(tools, oauthTool) || needs {
		t.Fatalf("after authorizing: tools %v needs_auth %v", tools, needs)
	}
	if !e.up(t, "acme") || e.up(t, "globex") {
		t.Fatal("up: want true for acme's open session only")
	}
	res = e.call(t, "acme")
	if !res.GetSuccess() || !strings.Contains(res.GetObservation(), "echo: hi") {
		t.Fatalf("call after authorizing: error %v output %q", res.GetErrorMessage(), res.GetObservation())
	}
	e.mu.Lock()
	seen := e.calls["tok-acme"]
	e.mu.Unlock()
	if seen == 0 {
		t.Fatal("the MCP server never saw acme's token")
	}

	// Another tenant still sees nothing and is told to authorize.
	tools, needs = e.list(t, "globex")
	if slices.Contains(tools, oauthTool) || !needs {
		t.Fatalf("globex: tools %v needs_auth %v", tools, needs)
	}
	if res := e.call(t, "globex"); res.GetErrorCode() != external.CodeAuthRequired {
		t.Fatalf("globex call: %v, want %s", res.GetErrorMessage(), external.CodeAuthRequired)
	}

	// Revoked: back to needs_auth, no tools, calls refused.
	if ok, err := e.flow.Revoke(context.Background(), "acme", "linear"); err != nil || !ok {
		t.Fatalf("Revoke = %v, %v", ok, err)
	}
	tools, needs = e.list(t, "acme")
	if slices.Contains(tools, oauthTool) || !needs {
		t.Fatalf("after revoking: tools %v needs_auth %v", tools, needs)
	}
	if res := e.call(t, "acme"); res.GetErrorCode() != external.CodeAuthRequired {
		t.Fatalf("call after revoking: %v, want %s", res.GetErrorMessage(), external.CodeAuthRequired)
	}
}

func TestOAuthMCPServerRefusedTokenDropsGrant(t *testing.T) {
	e := newOAuthMCPEnv(t)
	e.grant(t, "acme", "tok-acme", true)
	if res := e.call(t, "acme"); !res.GetSuccess() {
		t.Fatalf("first call: %v", res.GetErrorMessage())
	}
	// The server stops accepting the token (revoked at the provider): the
	// next call is refused with 401, the grant is dropped and the tenant
	// is told to authorize again.
	e.mu.Lock()
	e.tokens["tok-acme"] = false
	e.mu.Unlock()
	res := e.call(t, "acme")
	if res.GetErrorCode() != external.CodeAuthRequired {
		t.Fatalf("call with a refused token: %v, want %s", res.GetErrorMessage(), external.CodeAuthRequired)
	}
	st, err := e.flow.Status(context.Background(), "acme", "linear")
	if err != nil || st.Authorized {
		t.Fatalf("grant after a 401: authorized=%v err=%v, want dropped", st.Authorized, err)
	}
	if _, needs := e.list(t, "acme"); !needs {
		t.Fatal("needs_auth false after the server refused the token")
	}
}

func TestOAuthMCPServerSessionsEvicted(t *testing.T) {
	e := newOAuthMCPEnv(t) // at most 2 sessions
	for _, tenant := range []string{"t1", "t2", "t3"} {
		e.grant(t, tenant, "tok-"+tenant, true)
	}
	// Three tenants through two sessions: the least recently used is
	// closed, and reconnects when its tenant comes back.
	for _, tenant := range []string{"t1", "t2", "t3", "t1", "t3"} {
		if res := e.call(t, tenant); !res.GetSuccess() || !strings.Contains(res.GetObservation(), "echo: hi") {
			t.Fatalf("%s: error %v output %q", tenant, res.GetErrorMessage(), res.GetObservation())
		}
	}
}

// BenchmarkOAuthMCPInvoke is one Invoke of an auth: oauth server's tool by
// a tenant whose session is open: grant read, token, tools/call over HTTP.
func BenchmarkOAuthMCPInvoke(b *testing.B) {
	e := newOAuthMCPEnv(b)
	e.grant(b, "acme", "tok-acme", true)
	if res := e.call(b, "acme"); !res.GetSuccess() {
		b.Fatal(res.GetErrorMessage())
	}
	b.ReportAllocs()
	for b.Loop() {
		if res := e.call(b, "acme"); !res.GetSuccess() {
			b.Fatal(res.GetErrorMessage())
		}
	}
}

// BenchmarkOAuthMCPListTools is ListTools for a tenant whose session is
// open (the grant is read on every listing).
func BenchmarkOAuthMCPListTools(b *testing.B) {
	e := newOAuthMCPEnv(b)
	e.grant(b, "acme", "tok-acme", true)
	e.list(b, "acme")
	b.ReportAllocs()
	for b.Loop() {
		if tools, _ := e.list(b, "acme"); !slices.Contains(tools, oauthTool) {
			b.Fatal("tool missing")
		}
	}
}
