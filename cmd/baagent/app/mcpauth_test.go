package app

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/config"
)

func TestToolRunnerServesMCPAuthWithAKeyFile(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "mcp-oauth.key")
	if err := os.WriteFile(keyFile, []byte(strings.Repeat("ab", 32)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tools := filepath.Join(dir, "tools.yaml")
	if err := os.WriteFile(tools, []byte("mcp_servers:\n  - name: linear\n    http: {url: \"https://mcp.linear.app/mcp\"}\n    auth: oauth\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := mustLoad(t, testArgs(t, "-mcp-oauth-key-file="+keyFile, "-tools-file="+tools,
		"-mcp-oauth-redirect-url=https://agents.example.com/v1/mcp/oauth/callback"))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	a := startServing(t, ctx, cfg)
	conn, err := grpc.NewClient(a.Addr(config.TargetToolRunner).String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := baagentv1.NewMcpAuthServiceClient(conn)
	got, err := c.GetAuthorization(ctx, &baagentv1.GetAuthorizationRequest{Tenant: "acme", Server: "linear"})
	if err != nil || got.GetAuthorization().GetAuthorized() {
		t.Fatalf("GetAuthorization(linear) = %v, %v; want not authorized", got, err)
	}
	_, err = c.GetAuthorization(ctx, &baagentv1.GetAuthorizationRequest{Tenant: "acme", Server: "github"})
	if status.Code(err) != codes.NotFound {
		t.Fatalf("GetAuthorization(github) = %v, want NotFound", err)
	}
	// ListTools reports the server as needing the tenant's authorization.
	listed, err := baagentv1.NewToolRunnerServiceClient(conn).ListTools(ctx, &baagentv1.ListToolsRequest{Tenant: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	if s := listed.GetServers(); len(s) != 1 || s[0].GetName() != "linear" || !s[0].GetNeedsAuth() || s[0].GetUp() {
		t.Fatalf("servers = %v, want linear needing auth", s)
	}
}

func TestMCPOAuthKeyFileNeedsRedirectURL(t *testing.T) {
	_, err := LoadConfig(testArgs(t, "-mcp-oauth-key-file=/nonexistent"), func(string) string { return "" }, nil)
	if err == nil || !strings.Contains(err.Error(), "mcp-oauth-redirect-url") {
		t.Fatalf("err = %v, want it to name mcp-oauth-redirect-url", err)
	}
}
