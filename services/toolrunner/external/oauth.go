package external

import (
	"context"
	"slices"
	"strings"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/services/toolrunner/mcpauth"
)

// OAuthServers returns the `auth: oauth` entries of cfg as the servers
// McpAuthService authorizes, by name.
func (cfg Config) OAuthServers() map[string]mcpauth.Server {
	out := make(map[string]mcpauth.Server)
	for _, s := range cfg.MCPServers {
		if s.Auth != AuthOAuth || s.HTTP == nil {
			continue
		}
		srv := mcpauth.Server{Name: s.Name, URL: s.HTTP.URL}
		if o := s.OAuth; o != nil {
			srv.ClientID, srv.ClientSecret = o.ClientID, o.ClientSecret
			srv.Scopes = append([]string(nil), o.Scopes...)
		}
		out[s.Name] = srv
	}
	return out
}

// Authorized reports whether tenant holds a token for an auth: oauth server.
type Authorized func(ctx context.Context, tenant, server string) (bool, error)

// ServerStatus returns every configured MCP server's state for tenant,
// sorted by name: whether it is up and, for auth: oauth servers, whether the
// tenant must authorize it first. With authorized nil (MCP OAuth off) every
// auth: oauth server needs authorization. A failure to read a tenant's
// authorization reports the server as needing it.
func (m *Manager) ServerStatus(ctx context.Context, tenant string, authorized Authorized) []*baagentv1.ExternalServerStatus {
	out := make([]*baagentv1.ExternalServerStatus, 0, len(m.mcps)+len(m.oauth))
	for _, s := range m.mcps {
		transport := "http"
		if s.cfg.Stdio != nil {
			transport = "stdio"
		}
		out = append(out, &baagentv1.ExternalServerStatus{Name: s.cfg.Name, Transport: transport, Up: s.Up()})
	}
	for _, o := range m.oauth {
		name := o.cfg.Name
		ok := false
		if authorized != nil {
			var err error
			if ok, err = authorized(ctx, tenant, name); err != nil {
				m.log.WarnContext(ctx, "reading an MCP OAuth authorization", "server", name, "error", err)
				ok = false
			}
		}
		out = append(out, &baagentv1.ExternalServerStatus{Name: name, Transport: "http", NeedsAuth: !ok, Up: ok && o.live(tenant)})
	}
	slices.SortFunc(out, func(a, b *baagentv1.ExternalServerStatus) int { return strings.Compare(a.GetName(), b.GetName()) })
	return out
}
