package external

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/baagent/baagent/services/toolrunner/tool"
)

func TestParseOAuthServer(t *testing.T) {
	doc := `
mcp_servers:
  - name: linear
    http: {url: "https://mcp.linear.app/mcp"}
    auth: oauth
  - name: gh
    http: {url: "https://api.githubcopilot.com/mcp/"}
    auth: oauth
    oauth: {client_id: Iv1.abc, client_secret: "${GH_SECRET}", scopes: [repo, read:org]}
  - name: plain
    http: {url: "https://example.com/mcp"}
`
	cfg, err := Parse([]byte(doc), env(map[string]string{"GH_SECRET": "s3"}))
	if err != nil {
		t.Fatal(err)
	}
	got := cfg.OAuthServers()
	if len(got) != 2 {
		t.Fatalf("oauth servers = %v, want linear and gh", got)
	}
	if l := got["linear"]; l.URL != "https://mcp.linear.app/mcp" || l.ClientID != "" {
		t.Fatalf("linear = %+v", l)
	}
	if g := got["gh"]; g.ClientID != "Iv1.abc" || g.ClientSecret != "s3" || strings.Join(g.Scopes, ",") != "repo,read:org" {
		t.Fatalf("gh = %+v", g)
	}
}

func TestParseOAuthErrors(t *testing.T) {
	for _, c := range []struct{ name, doc, want string }{
		{"stdio", "mcp_servers:\n - {name: a, stdio: {command: x}, auth: oauth}\n", "oauth needs an http server"},
		{"unknown auth", "mcp_servers:\n - {name: a, http: {url: 'https://h/mcp'}, auth: basic}\n", `must be empty or "oauth"`},
		{"oauth without auth", "mcp_servers:\n - {name: a, http: {url: 'https://h/mcp'}, oauth: {client_id: x}}\n", "set auth: oauth"},
		{"authorization header", "mcp_servers:\n - {name: a, http: {url: 'https://h/mcp', headers: {Authorization: 'Bearer x'}}, auth: oauth}\n", "remove this header"},
		{"secret without id", "mcp_servers:\n - {name: a, http: {url: 'https://h/mcp'}, auth: oauth, oauth: {client_secret: x}}\n", "needs client_id"},
		{"bad scope", "mcp_servers:\n - {name: a, http: {url: 'https://h/mcp'}, auth: oauth, oauth: {scopes: ['a b']}}\n", "scopes[0]"},
		{"unknown key", "mcp_servers:\n - {name: a, http: {url: 'https://h/mcp'}, auth: oauth, oauth: {secret: x}}\n", "secret"},
		{"unset secret", "mcp_servers:\n - {name: a, http: {url: 'https://h/mcp'}, auth: oauth, oauth: {client_id: x, client_secret: '${NOPE}'}}\n", "client_secret"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(c.doc), env(nil))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want it to mention %q", err, c.want)
			}
		})
	}
}

func TestManagerOAuthServersAreTenantSources(t *testing.T) {
	cfg := Config{MCPServers: []MCPServerConfig{
		{Name: "linear", HTTP: &HTTPConfig{URL: "https://mcp.linear.app/mcp"}, Auth: AuthOAuth},
		{Name: "plain", HTTP: &HTTPConfig{URL: "https://example.com/mcp"}},
	}}
	m, err := New(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	srcs := m.Sources()
	if len(srcs) != 2 || srcs[0].Name() != "mcp:plain" || srcs[1].Name() != "mcp:linear" {
		t.Fatalf("sources = %d, want mcp:plain then mcp:linear", len(srcs))
	}
	ts, ok := srcs[1].(tool.TenantSource)
	if !ok {
		t.Fatal("the auth: oauth source is not a tool.TenantSource")
	}
	// Without MCP OAuth (no flow), no tenant sees the tools and a call is
	// told to authorize.
	if got := ts.Tools(); len(got) != 0 {
		t.Errorf("Tools() = %d tools, want none without a tenant", len(got))
	}
	ctx := context.Background()
	if got := ts.TenantTools(ctx, "acme"); len(got) != 0 {
		t.Errorf("TenantTools = %d tools, want none", len(got))
	}
	if _, ok := ts.TenantTool(ctx, "acme", "mcp__plain__x"); ok {
		t.Error("the oauth source claimed another server's tool")
	}
	tl, ok := ts.TenantTool(ctx, "acme", "mcp__linear__list_issues")
	if !ok {
		t.Fatal("the oauth source did not resolve its own tool name")
	}
	_, err = tl.Execute(ctx, tool.Call{})
	var te *tool.Error
	if !errors.As(err, &te) || te.Code != CodeAuthRequired || !strings.Contains(te.Message, "baagentctl mcp authorize linear") {
		t.Fatalf("Execute error = %v, want %s telling how to authorize", err, CodeAuthRequired)
	}
}

func TestServerStatusReportsNeedsAuth(t *testing.T) {
	cfg := Config{MCPServers: []MCPServerConfig{
		{Name: "zeta", HTTP: &HTTPConfig{URL: "https://example.com/mcp"}},
		{Name: "linear", HTTP: &HTTPConfig{URL: "https://mcp.linear.app/mcp"}, Auth: AuthOAuth},
		{Name: "fs", Stdio: &StdioConfig{Command: "mcp-fs"}},
	}}
	m, err := New(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	authorized := func(_ context.Context, tenant, server string) (bool, error) {
		switch tenant {
		case "acme":
			return server == "linear", nil
		case "broken":
			return true, errors.New("kv down")
		}
		return false, nil
	}
	render := func(tenant string, a Authorized) string {
		var b strings.Builder
		for _, s := range m.ServerStatus(context.Background(), tenant, a) {
			fmt.Fprintf(&b, "%s/%s/up=%v/needs_auth=%v ", s.GetName(), s.GetTransport(), s.GetUp(), s.GetNeedsAuth())
		}
		return strings.TrimSpace(b.String())
	}
	for _, c := range []struct {
		tenant string
		a      Authorized
		want   string
	}{
		{"acme", authorized, "fs/stdio/up=false/needs_auth=false linear/http/up=false/needs_auth=false zeta/http/up=false/needs_auth=false"},
		{"globex", authorized, "fs/stdio/up=false/needs_auth=false linear/http/up=false/needs_auth=true zeta/http/up=false/needs_auth=false"},
		{"broken", authorized, "fs/stdio/up=false/needs_auth=false linear/http/up=false/needs_auth=true zeta/http/up=false/needs_auth=false"},
		{"acme", nil, "fs/stdio/up=false/needs_auth=false linear/http/up=false/needs_auth=true zeta/http/up=false/needs_auth=false"},
	} {
		if got := render(c.tenant, c.a); got != c.want {
			t.Errorf("%s: got  %s\nwant %s", c.tenant, got, c.want)
		}
	}
}
