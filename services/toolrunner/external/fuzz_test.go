package external

import (
	"slices"
	"strings"
	"testing"
)

// FuzzParse feeds the tools-file loader arbitrary documents: it must never
// panic, and what it accepts must satisfy the rules it enforces.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"",
		"providers:\n - {name: a, address: 'h:1', timeout: 5s}\n",
		"mcp_servers:\n - name: fs\n   stdio: {command: npx, args: [-y, x], env: {T: '${A}'}}\n",
		"mcp_servers:\n - {name: r, http: {url: 'https://h/mcp', headers: {A: b}}}\n",
		"policies: {x: 1}\nproviders: []\n",
		"mcp_servers:\n - {name: s, transport: sse, http: {url: 'https://h/sse'}}\n",
		"mcp_servers:\n - {name: w, http: {url: 'wss://h/mcp', headers: {X: '${A}'}}}\n",
		"mcp_servers:\n - {name: w, transport: websocket, http: {url: 'http://h/mcp'}}\n",
		"providers: [{name: a, address: 'dns:///h:1', tls: {enabled: true, ca_file: x}}]",
		"providers: &a [*a]",
		"{",
	} {
		f.Add([]byte(seed))
	}
	lookup := env(map[string]string{"A": "v"})
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse(data, lookup)
		if err != nil {
			return
		}
		seen := map[string]bool{}
		for _, p := range cfg.Providers {
			if !validServerName(p.Name) || p.Address == "" || p.Timeout < 0 || seen[p.Name] {
				t.Fatalf("accepted invalid provider %+v", p)
			}
			seen[p.Name] = true
		}
		for _, s := range cfg.MCPServers {
			if !validServerName(s.Name) || (s.Stdio == nil) == (s.HTTP == nil) || seen[s.Name] {
				t.Fatalf("accepted invalid MCP server %+v", s)
			}
			seen[s.Name] = true
			if (s.TransportKind() == TransportStdio) != (s.Stdio != nil) || !slices.Contains(transports, s.TransportKind()) {
				t.Fatalf("accepted transport %q for %+v", s.TransportKind(), s)
			}
			if s.TransportKind() != TransportWebSocket && s.HTTP != nil && isWebSocketURL(s.HTTP.URL) {
				t.Fatalf("accepted a WebSocket URL for transport %q", s.TransportKind())
			}
			if s.Stdio != nil && strings.TrimSpace(s.Stdio.Command) == "" {
				t.Fatalf("accepted an empty command: %+v", s)
			}
			if s.HTTP != nil {
				for _, v := range s.HTTP.Headers {
					if strings.ContainsAny(v, "\r\n") {
						t.Fatalf("accepted a header with a line break: %q", v)
					}
				}
			}
		}
	})
}
