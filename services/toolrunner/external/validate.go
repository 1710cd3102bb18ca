package external

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/baagent/baagent/internal/validate"
)

// validServerName reports whether s can name a provider or MCP server: 1–32
// characters of [A-Za-z0-9_-], starting with a letter or digit, not ending
// with `_` and without `__`, so that `mcp__<server>__<tool>` splits back
// unambiguously.
func validServerName(s string) bool {
	if s == "" || len(s) > maxServerNameLen || strings.Contains(s, "__") || s[len(s)-1] == '_' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case (c == '_' || c == '-') && i > 0:
		default:
			return false
		}
	}
	return true
}

const serverNameRule = "must be 1-32 characters of [A-Za-z0-9_-], start with a letter or digit, not end with _ and not contain __"

func validateName(path, name string) error {
	if name == "" {
		return fmt.Errorf("%s.name: required", path)
	}
	if !validServerName(name) {
		return fmt.Errorf("%s.name: %q %s", path, clip(name), serverNameRule)
	}
	return nil
}

func validateProvider(p ProviderConfig, path string) error {
	errs := []error{validateName(path, p.Name)}
	if err := validateAddress(p.Address); err != nil {
		errs = append(errs, fmt.Errorf("%s.address: %w", path, err))
	}
	if p.Timeout < 0 || p.Timeout.Std() > maxAttemptTimeout {
		errs = append(errs, fmt.Errorf("%s.timeout: must be between 0s and %s", path, maxAttemptTimeout))
	}
	if p.RefreshInterval != 0 && (p.RefreshInterval.Std() < minRefresh || p.RefreshInterval.Std() > maxRefresh) {
		errs = append(errs, fmt.Errorf("%s.refresh_interval: must be between %s and %s", path, minRefresh, maxRefresh))
	}
	t := p.TLS
	if !t.Enabled && (t.CAFile != "" || t.CertFile != "" || t.KeyFile != "" || t.ServerName != "") {
		errs = append(errs, fmt.Errorf("%s.tls.enabled: must be true when other tls settings are given", path))
	}
	if (t.CertFile == "") != (t.KeyFile == "") {
		errs = append(errs, fmt.Errorf("%s.tls: cert_file and key_file go together", path))
	}
	for _, f := range [...]struct{ field, v string }{{"ca_file", t.CAFile}, {"cert_file", t.CertFile}, {"key_file", t.KeyFile}, {"server_name", t.ServerName}} {
		if err := checkString(f.v); err != nil {
			errs = append(errs, fmt.Errorf("%s.tls.%s: %w", path, f.field, err))
		}
	}
	errs = append(errs, validateToolFilter(path, p.Tools))
	return errors.Join(errs...)
}

func validateMCPServer(s MCPServerConfig, path string) error {
	errs := []error{validateName(path, s.Name)}
	switch {
	case s.Stdio != nil && s.HTTP != nil:
		errs = append(errs, fmt.Errorf("%s: set exactly one of stdio and http, not both", path))
	case s.Stdio == nil && s.HTTP == nil:
		errs = append(errs, fmt.Errorf("%s: set exactly one of stdio and http", path))
	case s.Stdio != nil:
		errs = append(errs, validateStdio(*s.Stdio, path+".stdio"))
	default:
		errs = append(errs, validateHTTP(*s.HTTP, path+".http", s.TransportKind()))
	}
	errs = append(errs, validateTransport(s, path))
	if s.Timeout < 0 || s.Timeout.Std() > maxAttemptTimeout {
		errs = append(errs, fmt.Errorf("%s.timeout: must be between 0s and %s", path, maxAttemptTimeout))
	}
	errs = append(errs, validateToolFilter(path, s.Tools), validateAuth(s, path))
	return errors.Join(errs...)
}

func validateAuth(s MCPServerConfig, path string) error {
	var errs []error
	switch s.Auth {
	case "":
		if s.OAuth != nil {
			errs = append(errs, fmt.Errorf("%s.oauth: set auth: oauth to use it", path))
		}
		return errors.Join(errs...)
	case AuthOAuth:
	default:
		return fmt.Errorf("%s.auth: must be empty or %q", path, AuthOAuth)
	}
	if s.HTTP == nil {
		errs = append(errs, fmt.Errorf("%s.auth: oauth needs an http server", path))
	} else {
		for k := range s.HTTP.Headers {
			if strings.EqualFold(k, "Authorization") {
				errs = append(errs, fmt.Errorf("%s.http.headers.%s: an auth: oauth server gets the tenant's token; remove this header", path, k))
			}
		}
	}
	if o := s.OAuth; o != nil {
		for _, f := range [...]struct{ field, v string }{{"client_id", o.ClientID}, {"client_secret", o.ClientSecret}} {
			if err := checkString(f.v); err != nil || strings.ContainsAny(f.v, "\r\n") {
				errs = append(errs, fmt.Errorf("%s.oauth.%s: must be one line of valid UTF-8", path, f.field))
			}
		}
		if o.ClientSecret != "" && o.ClientID == "" {
			errs = append(errs, fmt.Errorf("%s.oauth.client_secret: needs client_id", path))
		}
		if len(o.Scopes) > maxArgs {
			errs = append(errs, fmt.Errorf("%s.oauth.scopes: at most %d scopes", path, maxArgs))
		}
		for i, sc := range o.Scopes {
			if sc == "" || strings.ContainsAny(sc, " \"\\") || checkString(sc) != nil {
				errs = append(errs, fmt.Errorf("%s.oauth.scopes[%d]: not a valid scope", path, i))
			}
		}
	}
	return errors.Join(errs...)
}

func validateStdio(c StdioConfig, path string) error {
	var errs []error
	if strings.TrimSpace(c.Command) == "" {
		errs = append(errs, fmt.Errorf("%s.command: required", path))
	} else if err := checkString(c.Command); err != nil {
		errs = append(errs, fmt.Errorf("%s.command: %w", path, err))
	}
	if len(c.Args) > maxArgs {
		errs = append(errs, fmt.Errorf("%s.args: at most %d arguments", path, maxArgs))
	}
	for i, a := range c.Args {
		if err := checkString(a); err != nil {
			errs = append(errs, fmt.Errorf("%s.args[%d]: %w", path, i, err))
		}
	}
	if len(c.Env) > maxEnv {
		errs = append(errs, fmt.Errorf("%s.env: at most %d variables", path, maxEnv))
	}
	for _, k := range slices.Sorted(maps.Keys(c.Env)) {
		v := c.Env[k]
		if !isEnvName(k) {
			errs = append(errs, fmt.Errorf("%s.env: %q is not a variable name ([A-Za-z_][A-Za-z0-9_]*)", path, clip(k)))
			continue
		}
		if err := checkString(v); err != nil {
			errs = append(errs, fmt.Errorf("%s.env.%s: %w", path, k, err))
		}
	}
	if err := checkString(c.Dir); err != nil {
		errs = append(errs, fmt.Errorf("%s.dir: %w", path, err))
	}
	return errors.Join(errs...)
}

// validateTransport checks `transport:` against the entry's block; the
// URL's scheme is checked by validateHTTP.
func validateTransport(s MCPServerConfig, path string) error {
	if s.Transport == "" {
		return nil
	}
	if !slices.Contains(transports, s.Transport) {
		names := make([]string, len(transports))
		for i, t := range transports {
			names[i] = string(t)
		}
		return fmt.Errorf("%s.transport: %q is not one of %s", path, clip(string(s.Transport)), strings.Join(names, ", "))
	}
	switch {
	case s.Transport == TransportStdio && s.Stdio == nil:
		return fmt.Errorf("%s.transport: stdio needs a stdio block, not http", path)
	case s.Transport != TransportStdio && s.HTTP == nil:
		return fmt.Errorf("%s.transport: %s needs an http block with the url, not stdio", path, s.Transport)
	}
	return nil
}

// isWebSocketURL reports a ws:// or wss:// URL.
func isWebSocketURL(raw string) bool {
	u, err := url.Parse(raw)
	return err == nil && (u.Scheme == "ws" || u.Scheme == "wss")
}

func validateHTTP(c HTTPConfig, path string, transport Transport) error {
	var errs []error
	u, err := url.Parse(c.URL)
	schemes, schemeRule := []string{"http", "https"}, "http or https"
	if transport == TransportWebSocket {
		schemes, schemeRule = []string{"ws", "wss", "http", "https"}, "ws, wss, http or https"
	} else if transport == TransportSSE {
		schemeRule += " for the sse transport"
	}
	switch {
	case c.URL == "":
		errs = append(errs, fmt.Errorf("%s.url: required", path))
	case err != nil || checkString(c.URL) != nil:
		errs = append(errs, fmt.Errorf("%s.url: not a valid URL", path))
	case !slices.Contains(schemes, u.Scheme):
		errs = append(errs, fmt.Errorf("%s.url: the scheme must be %s", path, schemeRule))
	case u.Host == "":
		errs = append(errs, fmt.Errorf("%s.url: the host is missing", path))
	case u.User != nil:
		errs = append(errs, fmt.Errorf("%s.url: credentials in the URL are refused; use headers with ${NAME}", path))
	}
	if len(c.Headers) > maxEnv {
		errs = append(errs, fmt.Errorf("%s.headers: at most %d headers", path, maxEnv))
	}
	for _, k := range slices.Sorted(maps.Keys(c.Headers)) {
		v := c.Headers[k]
		if !validHeaderName(k) {
			errs = append(errs, fmt.Errorf("%s.headers: %q is not a valid header name", path, clip(k)))
			continue
		}
		if err := checkString(v); err != nil || strings.ContainsAny(v, "\r\n") {
			errs = append(errs, fmt.Errorf("%s.headers.%s: must be one line of valid UTF-8", path, k))
		}
	}
	return errors.Join(errs...)
}

func validHeaderName(k string) bool {
	if k == "" || len(k) > 256 {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte("()<>@,;:\\\"/[]?={}", c) >= 0 {
			return false
		}
	}
	// Hop-by-hop and framing headers are the transport's business.
	switch http.CanonicalHeaderKey(k) {
	case "Content-Length", "Content-Type", "Host", "Connection", "Transfer-Encoding", "Mcp-Session-Id", "Upgrade":
		return false
	}
	if strings.HasPrefix(http.CanonicalHeaderKey(k), "Sec-Websocket-") {
		return false // the WebSocket handshake's own
	}
	return true
}

func validateToolFilter(path string, names []string) error {
	if len(names) > maxToolFilter {
		return fmt.Errorf("%s.tools: at most %d names", path, maxToolFilter)
	}
	var errs []error
	for i, n := range names {
		var e validate.Errors
		validate.ToolName(&e, fmt.Sprintf("%s.tools[%d]", path, i), n)
		if e.Len() > 0 {
			v := e.Violations()[0]
			errs = append(errs, fmt.Errorf("%s: %s", v.GetField(), v.GetDescription()))
		}
	}
	return errors.Join(errs...)
}

// validateAddress accepts `host:port` and the gRPC target schemes a
// deployment uses (`dns:///host:port`, `unix:///path`, `unix:path`).
func validateAddress(a string) error {
	if a == "" {
		return errors.New("required")
	}
	if err := checkString(a); err != nil || strings.ContainsAny(a, " \t") {
		return errors.New("must be one word of valid UTF-8")
	}
	for _, scheme := range []string{"dns:", "unix:", "unix-abstract:", "passthrough:"} {
		if rest, ok := strings.CutPrefix(a, scheme); ok {
			if strings.Trim(rest, "/") == "" {
				return fmt.Errorf("%q names no host or path", a)
			}
			return nil
		}
	}
	host, port, err := net.SplitHostPort(a)
	if err != nil || port == "" {
		return fmt.Errorf("%q must be host:port (or dns:///host:port, unix:///path)", clip(a))
	}
	_ = host // an empty host means localhost for gRPC, as for net.Dial
	return nil
}

// checkString refuses invalid UTF-8, NUL and oversize values.
func checkString(s string) error {
	switch {
	case len(s) > maxStringBytes:
		return fmt.Errorf("at most %d bytes", maxStringBytes)
	case !utf8.ValidString(s):
		return errors.New("must be valid UTF-8")
	case strings.IndexByte(s, 0) >= 0:
		return errors.New("must not contain NUL")
	}
	return nil
}

// checkUniqueNames refuses two servers with one name, across both lists, so
// that a name always identifies one source in logs and metrics.
func checkUniqueNames(cfg Config) []error {
	var errs []error
	seen := make(map[string]string)
	for i, p := range cfg.Providers {
		path := fmt.Sprintf("providers[%d].name", i)
		if prev, ok := seen[p.Name]; ok {
			errs = append(errs, fmt.Errorf("%s: %q is already used by %s", path, p.Name, prev))
			continue
		}
		seen[p.Name] = path
	}
	for i, s := range cfg.MCPServers {
		path := fmt.Sprintf("mcp_servers[%d].name", i)
		if prev, ok := seen[s.Name]; ok {
			errs = append(errs, fmt.Errorf("%s: %q is already used by %s", path, s.Name, prev))
			continue
		}
		seen[s.Name] = path
	}
	return errs
}
