// Package external connects the toolrunner to tools that live outside the
// process: ToolProvider gRPC servers written in any language and MCP servers
// (stdio child processes or streamable HTTP endpoints).
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
	// Stdio runs the server as a child process speaking MCP on stdin/stdout.
	Stdio *StdioConfig `yaml:"stdio"`
	// HTTP connects to a streamable HTTP endpoint.
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

// HTTPConfig connects to an MCP server over streamable HTTP.
type HTTPConfig struct {
	// URL is the MCP endpoint (`https://host/mcp`).
	URL string `yaml:"url"`
	// Headers are sent with every request (`Authorization: Bearer ${TOKEN}`);
	// values may reference the environment as `${NAME}`.
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
