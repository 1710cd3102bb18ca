package mcpauth

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// serveGRPC serves the Service on loopback and points the flow's redirect
// at a callback that completes through the RPC, as the gateway does.
func serveGRPC(t *testing.T, e *env) baagentv1.McpAuthServiceClient {
	t.Helper()
	svc := &Service{Flow: e.flow, Servers: func(name string) (Server, bool) {
		if name == "linear" {
			return e.server(), true
		}
		return Server{}, false
	}}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	baagentv1.RegisterMcpAuthServiceServer(gs, svc)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	c := baagentv1.NewMcpAuthServiceClient(cc)
	cb := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		_, err := c.CompleteAuthorization(r.Context(), &baagentv1.CompleteAuthorizationRequest{
			State: q.Get("state"), Code: q.Get("code"), Error: q.Get("error")})
		if err != nil {
			http.Error(w, status.Convert(err).Message(), http.StatusBadRequest)
			return
		}
		_, _ = w.Write([]byte("authorized"))
	}))
	t.Cleanup(cb.Close)
	e.flow.RedirectURL = cb.URL + "/v1/mcp/oauth/callback"
	return c
}

func wantCode(t *testing.T, err error, code codes.Code, contains string) {
	t.Helper()
	if status.Code(err) != code || !strings.Contains(status.Convert(err).Message(), contains) {
		t.Fatalf("err = %v, want %s containing %q", err, code, contains)
	}
}

func TestServiceOverGRPC(t *testing.T) {
	e := newEnv(t)
	c := serveGRPC(t, e)
	ctx := context.Background()

	_, err := c.StartAuthorization(ctx, &baagentv1.StartAuthorizationRequest{Tenant: "bad tenant!", Server: "linear"})
	wantCode(t, err, codes.InvalidArgument, "tenant")
	_, err = c.StartAuthorization(ctx, &baagentv1.StartAuthorizationRequest{Tenant: "acme"})
	wantCode(t, err, codes.InvalidArgument, "server")
	_, err = c.StartAuthorization(ctx, &baagentv1.StartAuthorizationRequest{Tenant: "acme", Server: "github"})
	wantCode(t, err, codes.NotFound, "github")
	_, err = c.CompleteAuthorization(ctx, &baagentv1.CompleteAuthorizationRequest{State: "x"})
	wantCode(t, err, codes.InvalidArgument, "code")
	_, err = c.CompleteAuthorization(ctx, &baagentv1.CompleteAuthorizationRequest{State: "x", Code: "y"})
	wantCode(t, err, codes.FailedPrecondition, "start the authorization again")

	st, err := c.StartAuthorization(ctx, &baagentv1.StartAuthorizationRequest{Tenant: "acme", Server: "linear"})
	if err != nil {
		t.Fatal(err)
	}
	if !st.GetExpiresAt().IsValid() {
		t.Fatal("no expiry")
	}
	resp, err := e.browser.Get(st.GetAuthorizationUrl())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("callback %s", resp.Status)
	}
	got, err := c.GetAuthorization(ctx, &baagentv1.GetAuthorizationRequest{Tenant: "acme", Server: "linear"})
	if err != nil || !got.GetAuthorization().GetAuthorized() || got.GetAuthorization().GetExpiresAt() == nil {
		t.Fatalf("get = %v, %v", got, err)
	}
	other, err := c.GetAuthorization(ctx, &baagentv1.GetAuthorizationRequest{Tenant: "globex", Server: "linear"})
	if err != nil || other.GetAuthorization().GetAuthorized() {
		t.Fatalf("other tenant = %v, %v", other, err)
	}

	// The user denies consent: the state is consumed with the error.
	st2, err := c.StartAuthorization(ctx, &baagentv1.StartAuthorizationRequest{Tenant: "globex", Server: "linear"})
	if err != nil {
		t.Fatal(err)
	}
	state := mustQuery(t, st2.GetAuthorizationUrl(), "state")
	_, err = c.CompleteAuthorization(ctx, &baagentv1.CompleteAuthorizationRequest{State: state, Error: "access_denied"})
	wantCode(t, err, codes.FailedPrecondition, "access_denied")
	_, err = c.CompleteAuthorization(ctx, &baagentv1.CompleteAuthorizationRequest{State: state, Code: "late"})
	wantCode(t, err, codes.FailedPrecondition, "invalid, used or expired")

	rv, err := c.RevokeAuthorization(ctx, &baagentv1.RevokeAuthorizationRequest{Tenant: "acme", Server: "linear"})
	if err != nil || !rv.GetRevoked() {
		t.Fatalf("revoke = %v, %v", rv, err)
	}
	rv, err = c.RevokeAuthorization(ctx, &baagentv1.RevokeAuthorizationRequest{Tenant: "acme", Server: "linear"})
	if err != nil || rv.GetRevoked() {
		t.Fatalf("second revoke = %v, %v", rv, err)
	}
}

func mustQuery(t *testing.T, raw, key string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u.Query().Get(key)
}
