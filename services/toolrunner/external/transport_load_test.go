package external

import (
	"strings"
	"testing"
)

func TestParseTransport(t *testing.T) {
	t.Parallel()

	ok := []struct {
		name, entry string
		want        Transport
	}{
		{"stdio inferred", "{name: a, stdio: {command: x}}", TransportStdio},
		{"stdio explicit", "{name: a, transport: stdio, stdio: {command: x}}", TransportStdio},
		{"streamable inferred", "{name: a, http: {url: 'https://h/mcp'}}", TransportStreamable},
		{"streamable explicit", "{name: a, transport: streamable, http: {url: 'http://h/mcp'}}", TransportStreamable},
		{"sse", "{name: a, transport: sse, http: {url: 'https://h/sse', headers: {Authorization: 'Bearer t'}}}", TransportSSE},
		{"ws inferred", "{name: a, http: {url: 'ws://h:8080/mcp'}}", TransportWebSocket},
		{"wss inferred", "{name: a, http: {url: 'WSS://h/mcp'}}", TransportWebSocket},
		{"websocket over https", "{name: a, transport: websocket, http: {url: 'https://h/mcp'}}", TransportWebSocket},
	}
	for _, c := range ok {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := Parse([]byte("mcp_servers:\n - "+c.entry+"\n"), nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.MCPServers[0].TransportKind(); got != c.want {
				t.Fatalf("transport = %q, want %q", got, c.want)
			}
		})
	}

	bad := []struct{ name, entry, want string }{
		{"unknown", "{name: a, transport: grpc, http: {url: 'https://h/mcp'}}", `mcp_servers[1].transport: "grpc" is not one of stdio, streamable, sse, websocket`},
		{"number", "{name: a, transport: 5, http: {url: 'https://h/mcp'}}", `mcp_servers[1].transport: "5" is not one of`},
		{"stdio with http", "{name: a, transport: stdio, http: {url: 'https://h/mcp'}}", "mcp_servers[1].transport: stdio needs a stdio block"},
		{"sse with stdio", "{name: a, transport: sse, stdio: {command: x}}", "mcp_servers[1].transport: sse needs an http block"},
		{"websocket with stdio", "{name: a, transport: websocket, stdio: {command: x}}", "mcp_servers[1].transport: websocket needs an http block"},
		{"sse with ws url", "{name: a, transport: sse, http: {url: 'ws://h/sse'}}", "mcp_servers[1].http.url: the scheme must be http or https for the sse transport"},
		{"streamable with ws url", "{name: a, transport: streamable, http: {url: 'wss://h/mcp'}}", "mcp_servers[1].http.url: the scheme must be http or https"},
		{"websocket ftp", "{name: a, http: {url: 'ftp://h/mcp'}, transport: websocket}", "mcp_servers[1].http.url: the scheme must be ws, wss, http or https"},
		{"ws credentials", "{name: a, http: {url: 'wss://u:p@h/mcp'}}", "mcp_servers[1].http.url: credentials in the URL are refused"},
		{"ws handshake header", "{name: a, http: {url: 'wss://h/mcp', headers: {Sec-WebSocket-Protocol: x}}}", "mcp_servers[1].http.headers:"},
		{"upgrade header", "{name: a, http: {url: 'wss://h/mcp', headers: {upgrade: x}}}", "not a valid header name"},
		{"transport not string", "{name: a, transport: [sse], http: {url: 'https://h/mcp'}}", "mcp_servers[1]:"},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			// The bad entry is second, to check that the error names it.
			_, err := Parse([]byte("mcp_servers:\n - {name: ok, stdio: {command: x}}\n - "+c.entry+"\n"), nil)
			if err == nil {
				t.Fatalf("accepted %s", c.entry)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q does not contain %q", err, c.want)
			}
		})
	}
}

func TestOriginOf(t *testing.T) {
	t.Parallel()

	same := [][2]string{
		{"https://H.example/mcp", "https://h.example:443/other"},
		{"wss://h.example/mcp", "https://h.example/sse?x=1"},
		{"ws://h:8080/mcp", "http://h:8080/"},
		{"http://[::1]/mcp", "http://[::1]:80/message"},
	}
	for _, p := range same {
		a, _ := originOf(p[0])
		b, _ := originOf(p[1])
		if a != b {
			t.Errorf("%s and %s: origins %q and %q differ", p[0], p[1], a, b)
		}
	}
	differ := [][2]string{
		{"https://h/mcp", "http://h/mcp"},
		{"https://h/mcp", "https://h:8443/mcp"},
		{"https://h/mcp", "https://h.evil/mcp"},
		{"https://h/mcp", "https://evil/h/mcp"},
	}
	for _, p := range differ {
		a, _ := originOf(p[0])
		b, _ := originOf(p[1])
		if a == b {
			t.Errorf("%s and %s: same origin %q", p[0], p[1], a)
		}
	}
}
