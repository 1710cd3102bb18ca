package gateway

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	vt "github.com/baagent/baagent/internal/validate/validatetest"
)

// fakeMCPAuth records who asked and answers like the toolrunner.
type fakeMCPAuth struct {
	baagentv1.UnimplementedMcpAuthServiceServer
	mu      sync.Mutex
	tenants []string
	states  []string
}

func (f *fakeMCPAuth) saw(tenant string) {
	f.mu.Lock()
	f.tenants = append(f.tenants, tenant)
	f.mu.Unlock()
}

func (f *fakeMCPAuth) StartAuthorization(_ context.Context, r *baagentv1.StartAuthorizationRequest) (*baagentv1.StartAuthorizationResponse, error) {
	f.saw(r.GetTenant())
	if r.GetServer() != "linear" {
		return nil, status.Error(codes.NotFound, "no MCP server")
	}
	return &baagentv1.StartAuthorizationResponse{AuthorizationUrl: "https://as.example/authorize?state=s", ExpiresAt: timestamppb.Now()}, nil
}

func (f *fakeMCPAuth) CompleteAuthorization(_ context.Context, r *baagentv1.CompleteAuthorizationRequest) (*baagentv1.CompleteAuthorizationResponse, error) {
	f.mu.Lock()
	f.states = append(f.states, r.GetState())
	f.mu.Unlock()
	if r.GetState() != "good" {
		return nil, status.Error(codes.FailedPrecondition, "authorization state is invalid, used or expired\n<script>")
	}
	return &baagentv1.CompleteAuthorizationResponse{Tenant: "acme", Server: "linear"}, nil
}

func (f *fakeMCPAuth) GetAuthorization(_ context.Context, r *baagentv1.GetAuthorizationRequest) (*baagentv1.GetAuthorizationResponse, error) {
	f.saw(r.GetTenant())
	return &baagentv1.GetAuthorizationResponse{Authorization: &baagentv1.McpAuthorization{Server: r.GetServer(), Authorized: true}}, nil
}

func (f *fakeMCPAuth) RevokeAuthorization(_ context.Context, r *baagentv1.RevokeAuthorizationRequest) (*baagentv1.RevokeAuthorizationResponse, error) {
	f.saw(r.GetTenant())
	return &baagentv1.RevokeAuthorizationResponse{Revoked: true}, nil
}

func TestMCPAuthRoutes(t *testing.T) {
	fake := &fakeMCPAuth{}
	conn := vt.Serve(t, func(gs grpc.ServiceRegistrar) { baagentv1.RegisterMcpAuthServiceServer(gs, fake) })
	e := newEnv(t, Options{MCPAuth: baagentv1.NewMcpAuthServiceClient(conn)})

	if r := e.do(t, "", http.MethodPost, "/v1/mcp/servers/linear/authorize", "", nil); r.code != http.StatusUnauthorized {
		t.Fatalf("authorize without a key = %d", r.code)
	}
	r := e.do(t, keyAcme, http.MethodPost, "/v1/mcp/servers/linear/authorize", "", nil)
	if u, _ := r.body["authorization_url"].(string); r.code != http.StatusOK || !strings.HasPrefix(u, "https://as.example/") {
		t.Fatalf("authorize = %d %s", r.code, r.raw)
	}
	if r := e.do(t, keyAcme, http.MethodPost, "/v1/mcp/servers/github/authorize", "", nil); r.code != http.StatusNotFound {
		t.Fatalf("unknown server = %d %s", r.code, r.raw)
	}
	if r := e.do(t, keyInitech, http.MethodGet, "/v1/mcp/servers/linear/authorization", "", nil); r.code != http.StatusOK {
		t.Fatalf("status = %d %s", r.code, r.raw)
	}
	if r := e.do(t, keyAcme, http.MethodDelete, "/v1/mcp/servers/linear/authorization", "", nil); r.code != http.StatusOK || r.body["revoked"] != true {
		t.Fatalf("revoke = %d %s", r.code, r.raw)
	}
	fake.mu.Lock()
	tenants := strings.Join(fake.tenants, ",")
	fake.mu.Unlock()
	if tenants != "acme,acme,initech,acme" {
		t.Fatalf("tenants the toolrunner saw = %s; the gateway must pass the caller's own tenant", tenants)
	}

	// The callback needs no key: the state is the credential.
	r = e.do(t, "", http.MethodGet, "/v1/mcp/oauth/callback?state=good&code=c", "", nil)
	if r.code != http.StatusOK || !strings.Contains(r.raw, `Authorized MCP server "linear"`) || r.h.Get("Cache-Control") != "no-store" {
		t.Fatalf("callback = %d %q %v", r.code, r.raw, r.h)
	}
	r = e.do(t, "", http.MethodGet, "/v1/mcp/oauth/callback?state=stale&code=c", "", nil)
	if r.code != http.StatusBadRequest || !strings.Contains(r.raw, "invalid, used or expired") ||
		strings.Count(r.raw, "\n") != 1 || !strings.HasPrefix(r.h.Get("Content-Type"), "text/plain") {
		t.Fatalf("stale callback = %d %q", r.code, r.raw)
	}
	if r := e.do(t, "", http.MethodGet, "/v1/mcp/oauth/callback?code=c", "", nil); r.code != http.StatusBadRequest {
		t.Fatalf("callback without state = %d", r.code)
	}
	r = e.do(t, "", http.MethodGet, "/v1/mcp/oauth/callback?state=denied&error=access_denied", "", nil)
	if r.code != http.StatusBadRequest {
		t.Fatalf("denied callback = %d", r.code)
	}
	fake.mu.Lock()
	states := strings.Join(fake.states, ",")
	fake.mu.Unlock()
	if states != "good,stale,denied" {
		t.Fatalf("states passed on = %s", states)
	}
}

func TestMCPAuthRoutesWithoutToolrunnerOAuth(t *testing.T) {
	e := newEnv(t, Options{})
	if r := e.do(t, keyAcme, http.MethodPost, "/v1/mcp/servers/linear/authorize", "", nil); r.code != http.StatusNotImplemented {
		t.Fatalf("authorize = %d %s", r.code, r.raw)
	}
	if r := e.do(t, "", http.MethodGet, "/v1/mcp/oauth/callback?state=s&code=c", "", nil); r.code != http.StatusNotImplemented {
		t.Fatalf("callback = %d %s", r.code, r.raw)
	}
}

func TestMCPAuthRPCs(t *testing.T) {
	fake := &fakeMCPAuth{}
	conn := vt.Serve(t, func(gs grpc.ServiceRegistrar) { baagentv1.RegisterMcpAuthServiceServer(gs, fake) })
	e := newEnv(t, Options{MCPAuth: baagentv1.NewMcpAuthServiceClient(conn)})
	ctx := withKey(testCtx(t), keyInitech)
	if _, err := e.client.StartMcpAuthorization(ctx, &baagentv1.GatewayServiceStartMcpAuthorizationRequest{}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("empty server = %v", err)
	}
	st, err := e.client.StartMcpAuthorization(ctx, &baagentv1.GatewayServiceStartMcpAuthorizationRequest{Server: "linear"})
	if err != nil || st.GetAuthorizationUrl() == "" {
		t.Fatalf("start = %v, %v", st, err)
	}
	if _, err := e.client.StartMcpAuthorization(ctx, &baagentv1.GatewayServiceStartMcpAuthorizationRequest{Server: "github"}); status.Code(err) != codes.NotFound {
		t.Fatalf("unknown server = %v", err)
	}
	got, err := e.client.GetMcpAuthorization(ctx, &baagentv1.GatewayServiceGetMcpAuthorizationRequest{Server: "linear"})
	if err != nil || !got.GetAuthorization().GetAuthorized() {
		t.Fatalf("get = %v, %v", got, err)
	}
	rv, err := e.client.RevokeMcpAuthorization(ctx, &baagentv1.GatewayServiceRevokeMcpAuthorizationRequest{Server: "linear"})
	if err != nil || !rv.GetRevoked() {
		t.Fatalf("revoke = %v, %v", rv, err)
	}
	fake.mu.Lock()
	defer fake.mu.Unlock()
	for _, tn := range fake.tenants {
		if tn != "initech" {
			t.Fatalf("toolrunner saw tenant %q, want the key's tenant initech", tn)
		}
	}
	if _, err := e.client.GetMcpAuthorization(testCtx(t), &baagentv1.GatewayServiceGetMcpAuthorizationRequest{Server: "linear"}); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("no key = %v, want Unauthenticated", err)
	}
}

type fakeToolRunner struct {
	baagentv1.UnimplementedToolRunnerServiceServer
}

func (fakeToolRunner) ListTools(_ context.Context, r *baagentv1.ListToolsRequest) (*baagentv1.ListToolsResponse, error) {
	return &baagentv1.ListToolsResponse{Servers: []*baagentv1.ExternalServerStatus{
		{Name: "linear", Transport: "http", NeedsAuth: r.GetTenant() != "acme"},
	}}, nil
}

func TestListToolsPassesServerStatus(t *testing.T) {
	conn := vt.Serve(t, func(gs grpc.ServiceRegistrar) { baagentv1.RegisterToolRunnerServiceServer(gs, fakeToolRunner{}) })
	e := newEnv(t, Options{ToolRunner: baagentv1.NewToolRunnerServiceClient(conn)})
	resp, err := e.client.ListTools(withKey(testCtx(t), keyInitech), &baagentv1.GatewayServiceListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if s := resp.GetServers(); len(s) != 1 || s[0].GetName() != "linear" || !s[0].GetNeedsAuth() {
		t.Fatalf("servers = %v, want linear needing initech's authorization", s)
	}
	r := e.do(t, keyAcme, http.MethodGet, "/v1/tools", "", nil)
	if r.code != http.StatusOK || !strings.Contains(r.raw, `"name":"linear"`) || strings.Contains(r.raw, "needs_auth") {
		t.Fatalf("GET /v1/tools = %d %s", r.code, r.raw)
	}
}
