// Package external connects the toolrunner to tools that live outside the
// process: ToolProvider gRPC servers written in any language and MCP servers
// (stdio child processes, streamable HTTP, legacy HTTP+SSE and WebSocket
// endpoints).
//
// A [Manager] is built from the `providers:` and `mcp_servers:` sections of
// the tools file ([LoadFile]). It exposes one [tool.Source] per configured
// server ([Manager.Sources]); each source returns its tools only while its
// server is reachable, so the invoke pipeline never offers a tool that cannot
// run. [Manager.Run] owns every connection and child process: it keeps
// them alive (reconnecting and restarting with capped exponential backoff)
// until its context ends, then closes them and kills the children.
package external

import (
	"errors"
	"time"

	"github.com/baagent/baagent/internal/grpcclient"
)

// Config is the external-tools part of the tools file.
type Config struct {
	// Providers are ToolProvider gRPC servers.
	Providers []ProviderConfig
	// MCPServers are Model Context Protocol servers.
	MCPServers []MCPServerConfig
}

// ProviderConfig registers one ToolProvider server (`providers:` entry).
type ProviderConfig struct {
	// Name identifies the provider; its tools have source `provider:<name>`.
	Name string `yaml:"name"`
	// Address is the gRPC target: `host:port`, `dns:///host:port` or
	// `unix:///path`.
	Address string `yaml:"address"`
	// TLS is off by default (plaintext on a trusted network).
	TLS TLSConfig `yaml:"tls"`
	// Timeout is the default timeout of one tool attempt when the provider's
	// tool definition does not set one, and the timeout of DescribeTools.
	Timeout Duration `yaml:"timeout"`
	// RefreshInterval is how often the tool list is described again while
	// connected (default 1m). It is also described on every reconnect.
	RefreshInterval Duration `yaml:"refresh_interval"`
	// Tools, when set, keeps only these tool names from the provider.
	Tools []string `yaml:"tools"`
}

// TLSConfig secures a provider connection.
type TLSConfig = grpcclient.TLSFiles

// MCPServerConfig registers one MCP server (`mcp_servers:` entry); exactly
// one of Stdio and HTTP is set.
type MCPServerConfig struct {
	// Name identifies the server; its tools are named `mcp__<name>__<tool>`
	// and have source `mcp:<name>`.
	Name string `yaml:"name"`
	// Transport is how the server is reached: TransportStdio (with Stdio),
	// TransportStreamable, TransportSSE or TransportWebSocket (with HTTP).
	// Empty infers it (see TransportKind).
	Transport Transport `yaml:"transport"`
	// Stdio runs the server as a child process speaking MCP on stdin/stdout.
	Stdio *StdioConfig `yaml:"stdio"`
	// HTTP connects to a network endpoint: streamable HTTP, legacy HTTP+SSE
	// or WebSocket.
	HTTP *HTTPConfig `yaml:"http"`
	// Timeout bounds connecting and listing tools (default 30s; a first
	// `npx` run may download the server) and is the default timeout of one
	// tool attempt.
	Timeout Duration `yaml:"timeout"`
	// Tools, when set, keeps only these tool names (as the server names
	// them, without the `mcp__<name>__` prefix).
	Tools []string `yaml:"tools"`
	// Auth is empty (fixed headers only) or "oauth": each tenant authorizes
	// the server through OAuth 2.0 (McpAuthService) and its calls carry the
	// tenant's bearer token. Only for http servers.
	Auth string `yaml:"auth"`
	// OAuth optionally configures the OAuth client of an `auth: oauth`
	// server; without a client_id one is registered dynamically.
	OAuth *OAuthConfig `yaml:"oauth"`
}

// AuthOAuth is the MCPServerConfig.Auth value of OAuth-protected servers.
const AuthOAuth = "oauth"

// OAuthConfig is a pre-registered OAuth client and the scopes to request.
type OAuthConfig struct {
	// ClientID and ClientSecret are the registered client; the secret may
	// reference the environment as `${NAME}`.
	ClientID     string `yaml:"client_id"`
	ClientSecret string `yaml:"client_secret"`
	// Scopes to request; empty requests those the server advertises.
	Scopes []string `yaml:"scopes"`
}

// Transport names an MCP transport.
type Transport string

// The MCP transports.
const (
	// TransportStdio runs the server as a child process (newline-delimited
	// JSON-RPC on stdin/stdout).
	TransportStdio Transport = "stdio"
	// TransportStreamable is the streamable HTTP transport (MCP 2025-03-26
	// and later).
	TransportStreamable Transport = "streamable"
	// TransportSSE is the legacy HTTP+SSE transport (MCP 2024-11-05): an
	// event stream from GET on the URL, messages POSTed to the endpoint the
	// stream announces.
	TransportSSE Transport = "sse"
	// TransportWebSocket carries one JSON-RPC message per WebSocket text
	// message, subprotocol `mcp`.
	TransportWebSocket Transport = "websocket"
)

// transports are the accepted values of `transport:`, in documentation
// order.
var transports = []Transport{TransportStdio, TransportStreamable, TransportSSE, TransportWebSocket}

// TransportKind is the entry's transport: Transport when set, else stdio
// for a Stdio entry, websocket for an HTTP entry with a ws:// or wss:// URL
// and streamable for any other HTTP entry.
func (s MCPServerConfig) TransportKind() Transport {
	switch {
	case s.Transport != "":
		return s.Transport
	case s.Stdio != nil:
		return TransportStdio
	case s.HTTP != nil && isWebSocketURL(s.HTTP.URL):
		return TransportWebSocket
	default:
		return TransportStreamable
	}
}

// StdioConfig starts an MCP server as a child process.
type StdioConfig struct {
	// Command is the executable (looked up in PATH when it has no slash).
	Command string `yaml:"command"`
	// Args are its arguments.
	Args []string `yaml:"args"`
	// Env is added to the child's environment. Values may reference the
	// toolrunner's environment as `${NAME}` (for secrets kept out of the
	// file).
	Env map[string]string `yaml:"env"`
	// InheritEnv passes the toolrunner's whole environment to the child. By
	// default the child sees only PATH, HOME, USER, LANG, LC_ALL, TMPDIR and
	// TZ plus Env, so that the toolrunner's own secrets (model API keys) do
	// not leak into third-party servers.
	InheritEnv bool `yaml:"inherit_env"`
	// Dir is the working directory; empty keeps the toolrunner's.
	Dir string `yaml:"dir"`
}

// HTTPConfig connects to an MCP server over the network.
type HTTPConfig struct {
	// URL is the MCP endpoint: `https://host/mcp` (streamable),
	// `https://host/sse` (the SSE stream of the legacy transport) or
	// `wss://host/mcp` (WebSocket).
	URL string `yaml:"url"`
	// Headers are sent with every request to the URL's origin (scheme, host
	// and port) and never to another one, whatever a server redirects to or
	// announces as its message endpoint (`Authorization: Bearer ${TOKEN}`);
	// values may reference the environment as `${NAME}`. Over WebSocket they
	// go with the opening handshake.
	Headers map[string]string `yaml:"headers"`
}

// Duration is a time.Duration written as a Go duration string (`30s`,
// `1m30s`) in YAML. Bare numbers are refused because their unit would be a
// guess.
type Duration time.Duration

// Std returns d as a time.Duration.
func (d Duration) Std() time.Duration { return time.Duration(d) }

// ErrNoFile is wrapped by LoadFile when the file does not exist.
var ErrNoFile = errors.New("tools file not found")

// Validation limits.
const (
	maxFileBytes      = 1 << 20
	maxServers        = 64 // each of providers and mcp_servers
	maxServerNameLen  = 32
	maxArgs           = 256
	maxEnv            = 256
	maxToolFilter     = 1024
	maxStringBytes    = 4096
	maxAttemptTimeout = 10 * time.Minute
	minRefresh        = time.Second
	maxRefresh        = 24 * time.Hour
)
