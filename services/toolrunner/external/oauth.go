package external

import "github.com/baagent/baagent/services/toolrunner/mcpauth"

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
