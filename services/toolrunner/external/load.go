package external

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Top-level keys of the tools file. `policies` and `compositions` belong to
// the toolrunner's core (per-tool permissions and retry policies, tool
// compositions) and are skipped here.
var (
	ownKeys     = []string{"providers", "mcp_servers"}
	foreignKeys = []string{"policies", "hooks", "compositions"}
)

// LoadFile reads the tools file at path with the process environment for
// `${NAME}` references. A missing file wraps ErrNoFile.
func LoadFile(path string) (Config, error) {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return Config{}, fmt.Errorf("%w: %s", ErrNoFile, path)
		}
		return Config{}, fmt.Errorf("tools file: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFileBytes+1))
	if err != nil {
		return Config{}, fmt.Errorf("tools file %s: %w", path, err)
	}
	cfg, err := Parse(data, os.LookupEnv)
	if err != nil {
		return Config{}, fmt.Errorf("tools file %s: %w", path, err)
	}
	return cfg, nil
}

// Parse decodes and validates the `providers:` and `mcp_servers:` sections of
// a tools file. lookupEnv resolves `${NAME}` in stdio env values and HTTP
// header values (nil resolves nothing). Unknown keys are errors that name the
// entry (`mcp_servers[1].stdio: unknown key "comand"`), so a typo never
// silently drops a setting.
func Parse(data []byte, lookupEnv func(string) (string, bool)) (Config, error) {
	if len(data) > maxFileBytes {
		return Config{}, fmt.Errorf("file is larger than %d bytes", maxFileBytes)
	}
	if lookupEnv == nil {
		lookupEnv = func(string) (string, bool) { return "", false }
	}
	var root yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&root); err != nil {
		if errors.Is(err, io.EOF) {
			return Config{}, nil // an empty file configures nothing
		}
		return Config{}, fmt.Errorf("invalid YAML: %w", err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return Config{}, errors.New("the file must hold one YAML document")
	}
	doc := &root
	if doc.Kind == yaml.DocumentNode && len(doc.Content) == 1 {
		doc = doc.Content[0]
	}
	if doc.Kind == yaml.ScalarNode && doc.Tag == "!!null" {
		return Config{}, nil
	}
	if doc.Kind != yaml.MappingNode {
		return Config{}, fmt.Errorf("line %d: the top level must be a mapping with keys %s", doc.Line, strings.Join(append(slices.Clone(ownKeys), foreignKeys...), ", "))
	}
	if err := checkKeys(doc, "", append(slices.Clone(ownKeys), foreignKeys...)); err != nil {
		return Config{}, err
	}

	var cfg Config
	var errs []error
	for i := 0; i+1 < len(doc.Content); i += 2 {
		key, val := doc.Content[i].Value, doc.Content[i+1]
		switch key {
		case "providers":
			items, err := sequence(val, key, maxServers)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			for j, n := range items {
				p, err := decodeProvider(n, fmt.Sprintf("providers[%d]", j))
				if err != nil {
					errs = append(errs, err)
					continue
				}
				cfg.Providers = append(cfg.Providers, p)
			}
		case "mcp_servers":
			items, err := sequence(val, key, maxServers)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			for j, n := range items {
				s, err := decodeMCPServer(n, fmt.Sprintf("mcp_servers[%d]", j), lookupEnv)
				if err != nil {
					errs = append(errs, err)
					continue
				}
				cfg.MCPServers = append(cfg.MCPServers, s)
			}
		}
	}
	if len(errs) == 0 {
		errs = append(errs, checkUniqueNames(cfg)...)
	}
	if err := errors.Join(errs...); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

func sequence(n *yaml.Node, field string, max int) ([]*yaml.Node, error) {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil, nil
	}
	if n.Kind != yaml.SequenceNode {
		return nil, fmt.Errorf("%s: must be a list (line %d)", field, n.Line)
	}
	if len(n.Content) > max {
		return nil, fmt.Errorf("%s: at most %d entries, got %d", field, max, len(n.Content))
	}
	return n.Content, nil
}

// checkKeys refuses keys of mapping n that are not in allowed, and duplicate
// keys, naming the entry at path.
func checkKeys(n *yaml.Node, path string, allowed []string) error {
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("%s: must be a mapping (line %d)", orTop(path), n.Line)
	}
	seen := make(map[string]bool, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		if k.Kind != yaml.ScalarNode {
			return fmt.Errorf("%s: keys must be strings (line %d)", orTop(path), k.Line)
		}
		if !slices.Contains(allowed, k.Value) {
			return fmt.Errorf("%s: unknown key %q (line %d; known: %s)", orTop(path), clip(k.Value), k.Line, strings.Join(allowed, ", "))
		}
		if seen[k.Value] {
			return fmt.Errorf("%s: duplicate key %q (line %d)", orTop(path), k.Value, k.Line)
		}
		seen[k.Value] = true
	}
	return nil
}

func orTop(path string) string {
	if path == "" {
		return "top level"
	}
	return path
}

// child returns the value of key in mapping n, or nil.
func child(n *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

// decodeInto decodes n into v, naming path in the error.
func decodeInto(n *yaml.Node, path string, v any) error {
	if err := n.Decode(v); err != nil {
		return fmt.Errorf("%s: %s", path, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	return nil
}

func decodeProvider(n *yaml.Node, path string) (ProviderConfig, error) {
	var p ProviderConfig
	if err := checkKeys(n, path, []string{"name", "address", "tls", "timeout", "refresh_interval", "tools"}); err != nil {
		return p, err
	}
	if t := child(n, "tls"); t != nil {
		if err := checkKeys(t, path+".tls", []string{"enabled", "ca_file", "cert_file", "key_file", "server_name"}); err != nil {
			return p, err
		}
	}
	if err := decodeInto(n, path, &p); err != nil {
		return p, err
	}
	return p, validateProvider(p, path)
}

func decodeMCPServer(n *yaml.Node, path string, lookupEnv func(string) (string, bool)) (MCPServerConfig, error) {
	var s MCPServerConfig
	if err := checkKeys(n, path, []string{"name", "transport", "stdio", "http", "timeout", "tools", "auth", "oauth"}); err != nil {
		return s, err
	}
	if c := child(n, "oauth"); c != nil {
		if err := checkKeys(c, path+".oauth", []string{"client_id", "client_secret", "scopes"}); err != nil {
			return s, err
		}
	}
	if c := child(n, "stdio"); c != nil {
		if err := checkKeys(c, path+".stdio", []string{"command", "args", "env", "inherit_env", "dir"}); err != nil {
			return s, err
		}
	}
	if c := child(n, "http"); c != nil {
		if err := checkKeys(c, path+".http", []string{"url", "headers"}); err != nil {
			return s, err
		}
	}
	if err := decodeInto(n, path, &s); err != nil {
		return s, err
	}
	if err := validateMCPServer(s, path); err != nil {
		return s, err
	}
	// Expand `${NAME}` after validation so that error messages never echo a
	// secret value.
	if s.Stdio != nil {
		for k, v := range s.Stdio.Env {
			x, err := expandEnv(v, lookupEnv)
			if err != nil {
				return s, fmt.Errorf("%s.stdio.env.%s: %w", path, k, err)
			}
			s.Stdio.Env[k] = x
		}
	}
	if s.HTTP != nil {
		for k, v := range s.HTTP.Headers {
			x, err := expandEnv(v, lookupEnv)
			if err != nil {
				return s, fmt.Errorf("%s.http.headers.%s: %w", path, k, err)
			}
			if strings.ContainsAny(x, "\r\n\x00") {
				return s, fmt.Errorf("%s.http.headers.%s: the expanded value contains a line break or NUL", path, k)
			}
			s.HTTP.Headers[k] = x
		}
	}
	if s.OAuth != nil && s.OAuth.ClientSecret != "" {
		x, err := expandEnv(s.OAuth.ClientSecret, lookupEnv)
		if err != nil {
			return s, fmt.Errorf("%s.oauth.client_secret: %w", path, err)
		}
		s.OAuth.ClientSecret = x
	}
	return s, nil
}

// UnmarshalYAML reads a Go duration string.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
		return fmt.Errorf("line %d: a duration must be a string such as \"30s\" or \"1m\", got %q", n.Line, clip(n.Value))
	}
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: invalid duration %q: use a Go duration such as \"30s\" or \"1m\"", n.Line, clip(n.Value))
	}
	*d = Duration(v)
	return nil
}

// expandEnv replaces each `${NAME}` in s by the variable's value; an unset
// variable is an error (a silently empty token would fail far from here).
// `$$` stands for a literal `$`; any other `$` is kept as is.
func expandEnv(s string, lookup func(string) (string, bool)) (string, error) {
	if !strings.Contains(s, "$") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '$' || i+1 >= len(s) {
			b.WriteByte(c)
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '{':
			end := strings.IndexByte(s[i+2:], '}')
			if end < 0 {
				return "", errors.New("unterminated ${ reference")
			}
			name := s[i+2 : i+2+end]
			if !isEnvName(name) {
				return "", fmt.Errorf("invalid variable name %q in ${...}", clip(name))
			}
			v, ok := lookup(name)
			if !ok {
				return "", fmt.Errorf("environment variable %s is not set", name)
			}
			b.WriteString(v)
			i += 2 + end
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}

func isEnvName(s string) bool {
	if s == "" || len(s) > 256 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '_', c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// clip cuts a value echoed in an error message.
func clip(s string) string {
	const max = 64
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !isRuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }
