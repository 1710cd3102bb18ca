package external

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func env(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
}

func TestParseFull(t *testing.T) {
	t.Parallel()

	const doc = `
policies:            # owned by the core; skipped here
  file_write: {permission: ask}
hooks:               # owned by the core; skipped here
  - {name: guard, phase: pre, tools: ["*"], command: [/bin/true]}
providers:
  - name: finance
    address: 127.0.0.1:7790
    timeout: 5s
    refresh_interval: 30s
    tools: [convert_currency]
  - name: secure
    address: dns:///tools.internal:443
    tls: {enabled: true, server_name: tools.internal}
mcp_servers:
  - name: fs
    stdio:
      command: npx
      args: ["-y", "@modelcontextprotocol/server-filesystem", "/data"]
      env: {TOKEN: "${SECRET}", PLAIN: "a$$b", KEEP: "$HOME"}
      dir: /tmp
    timeout: 1m
  - name: remote
    http:
      url: https://mcp.example.com/mcp
      headers: {Authorization: "Bearer ${SECRET}"}
`
	cfg, err := Parse([]byte(doc), env(map[string]string{"SECRET": "s3"}))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Providers) != 2 || len(cfg.MCPServers) != 2 {
		t.Fatalf("got %d providers, %d mcp servers", len(cfg.Providers), len(cfg.MCPServers))
	}
	p := cfg.Providers[0]
	if p.Name != "finance" || p.Timeout.Std() != 5*time.Second || p.RefreshInterval.Std() != 30*time.Second || p.Tools[0] != "convert_currency" || p.TLS.Enabled {
		t.Errorf("provider 0 = %+v", p)
	}
	if !cfg.Providers[1].TLS.Enabled || cfg.Providers[1].TLS.ServerName != "tools.internal" {
		t.Errorf("provider 1 tls = %+v", cfg.Providers[1].TLS)
	}
	fs := cfg.MCPServers[0]
	if fs.Stdio == nil || fs.Stdio.Command != "npx" || len(fs.Stdio.Args) != 3 || fs.Stdio.Dir != "/tmp" || fs.Timeout.Std() != time.Minute {
		t.Errorf("fs = %+v", fs)
	}
	if got := fs.Stdio.Env; got["TOKEN"] != "s3" || got["PLAIN"] != "a$b" || got["KEEP"] != "$HOME" {
		t.Errorf("env expansion = %v", got)
	}
	if h := cfg.MCPServers[1].HTTP; h == nil || h.Headers["Authorization"] != "Bearer s3" {
		t.Errorf("remote = %+v", cfg.MCPServers[1])
	}
}

func TestParseEmpty(t *testing.T) {
	t.Parallel()

	for _, doc := range []string{"", "# nothing\n", "~\n", "policies: {}\n", "providers:\nmcp_servers:\n"} {
		cfg, err := Parse([]byte(doc), nil)
		if err != nil || len(cfg.Providers)+len(cfg.MCPServers) != 0 {
			t.Errorf("%q: %+v, %v", doc, cfg, err)
		}
	}
}

// TestParseErrors checks that every error names the entry and field.
func TestParseErrors(t *testing.T) {
	t.Parallel()

	cases := []struct{ name, doc, want string }{
		{"unknown top", "mcp_server: []", `top level: unknown key "mcp_server"`},
		{"top not map", "- a", "top level must be a mapping"},
		{"two docs", "providers: []\n---\nproviders: []", "one YAML document"},
		{"bad yaml", "providers: [", "invalid YAML"},
		{"providers not list", "providers: {name: x}", "providers: must be a list"},
		{"unknown provider key", "providers:\n - {name: a, address: 'h:1', adress: x}", `providers[0]: unknown key "adress"`},
		{"unknown tls key", "providers:\n - {name: a, address: 'h:1', tls: {enable: true}}", `providers[0].tls: unknown key "enable"`},
		{"dup key", "providers:\n - {name: a, name: b, address: 'h:1'}", `providers[0]: duplicate key "name"`},
		{"no name", "providers:\n - {address: 'h:1'}", "providers[0].name: required"},
		{"bad name", "providers:\n - {name: 'a b', address: 'h:1'}", "providers[0].name:"},
		{"double underscore", "mcp_servers:\n - {name: a__b, stdio: {command: x}}", "mcp_servers[0].name:"},
		{"trailing underscore", "mcp_servers:\n - {name: a_, stdio: {command: x}}", "mcp_servers[0].name:"},
		{"no address", "providers:\n - {name: a}", "providers[0].address: required"},
		{"bad address", "providers:\n - {name: a, address: nohostport}", "providers[0].address:"},
		{"int duration", "providers:\n - {name: a, address: 'h:1', timeout: 5}", "providers[0]: line 2: a duration must be a string"},
		{"bad duration", "providers:\n - {name: a, address: 'h:1', timeout: 5 minutes}", `invalid duration "5 minutes"`},
		{"neg timeout", "providers:\n - {name: a, address: 'h:1', timeout: -1s}", "providers[0].timeout:"},
		{"refresh too small", "providers:\n - {name: a, address: 'h:1', refresh_interval: 1ms}", "providers[0].refresh_interval:"},
		{"tls off with ca", "providers:\n - {name: a, address: 'h:1', tls: {ca_file: x}}", "providers[0].tls.enabled: must be true"},
		{"cert without key", "providers:\n - {name: a, address: 'h:1', tls: {enabled: true, cert_file: x}}", "cert_file and key_file go together"},
		{"bad tool filter", "providers:\n - {name: a, address: 'h:1', tools: ['a b']}", "providers[0].tools[0]:"},
		{"no transport", "mcp_servers:\n - {name: a}", "mcp_servers[0]: set exactly one of stdio and http"},
		{"both transports", "mcp_servers:\n - {name: a, stdio: {command: x}, http: {url: 'http://h/mcp'}}", "not both"},
		{"unknown stdio key", "mcp_servers:\n - {name: a}\n - {name: b, stdio: {comand: x}}", `mcp_servers[1].stdio: unknown key "comand"`},
		{"no command", "mcp_servers:\n - {name: a, stdio: {args: [x]}}", "mcp_servers[0].stdio.command: required"},
		{"bad env name", "mcp_servers:\n - {name: a, stdio: {command: x, env: {'A=B': c}}}", "mcp_servers[0].stdio.env:"},
		{"unset env", "mcp_servers:\n - {name: a, stdio: {command: x, env: {T: '${NOPE}'}}}", "mcp_servers[0].stdio.env.T: environment variable NOPE is not set"},
		{"unterminated", "mcp_servers:\n - {name: a, stdio: {command: x, env: {T: '${NOPE'}}}", "unterminated"},
		{"http scheme", "mcp_servers:\n - {name: a, http: {url: 'ftp://h/x'}}", "mcp_servers[0].http.url: the scheme must be http or https"},
		{"http user", "mcp_servers:\n - {name: a, http: {url: 'https://u:p@h/x'}}", "credentials in the URL"},
		{"bad header", "mcp_servers:\n - {name: a, http: {url: 'https://h/x', headers: {'Bad Header': v}}}", "mcp_servers[0].http.headers:"},
		{"framing header", "mcp_servers:\n - {name: a, http: {url: 'https://h/x', headers: {content-length: '1'}}}", "not a valid header name"},
		{"unknown http key", "mcp_servers:\n - {name: a, http: {uri: 'https://h/x'}}", `mcp_servers[0].http: unknown key "uri"`},
		{"dup names", "providers:\n - {name: a, address: 'h:1'}\nmcp_servers:\n - {name: a, stdio: {command: x}}", `mcp_servers[0].name: "a" is already used by providers[0].name`},
		{"args not list", "mcp_servers:\n - {name: a, stdio: {command: x, args: y}}", "mcp_servers[0]:"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(c.doc), env(nil))
			if err == nil {
				t.Fatalf("accepted:\n%s", c.doc)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q does not contain %q", err, c.want)
			}
		})
	}
}

func TestParseReportsAllEntries(t *testing.T) {
	t.Parallel()

	_, err := Parse([]byte("providers:\n - {name: a}\n - {name: b}\n"), nil)
	if err == nil || !strings.Contains(err.Error(), "providers[0].address") || !strings.Contains(err.Error(), "providers[1].address") {
		t.Fatalf("want both entries named, got %v", err)
	}
}

func TestParseLimits(t *testing.T) {
	t.Parallel()

	if _, err := Parse(make([]byte, maxFileBytes+1), nil); err == nil {
		t.Error("oversize file accepted")
	}
	var b strings.Builder
	b.WriteString("providers:\n")
	for i := 0; i <= maxServers; i++ {
		b.WriteString(" - {name: p, address: 'h:1'}\n")
	}
	if _, err := Parse([]byte(b.String()), nil); err == nil || !strings.Contains(err.Error(), "at most 64") {
		t.Errorf("65 providers: %v", err)
	}
}

func TestLoadFile(t *testing.T) {
	dir := t.TempDir()
	if _, err := LoadFile(filepath.Join(dir, "missing.yaml")); !errors.Is(err, ErrNoFile) {
		t.Fatalf("missing file: %v", err)
	}
	p := filepath.Join(dir, "tools.yaml")
	t.Setenv("BAAGENT_TEST_TOKEN", "tok")
	os.WriteFile(p, []byte("mcp_servers:\n - name: x\n   http: {url: 'http://127.0.0.1:1/mcp', headers: {X-Token: '${BAAGENT_TEST_TOKEN}'}}\n"), 0o600)
	cfg, err := LoadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MCPServers[0].HTTP.Headers["X-Token"] != "tok" {
		t.Fatalf("header = %v", cfg.MCPServers[0].HTTP.Headers)
	}
	os.WriteFile(p, []byte("providers: [{name: x}]"), 0o600)
	if _, err := LoadFile(p); err == nil || !strings.Contains(err.Error(), p) {
		t.Fatalf("error should name the file: %v", err)
	}
}

// TestExampleConfig keeps examples/config/tools.yaml valid.
func TestExampleConfig(t *testing.T) {
	t.Parallel()

	cfg, err := LoadFile(filepath.Join("..", "..", "..", "examples", "config", "tools.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Providers) == 0 || len(cfg.MCPServers) == 0 {
		t.Fatalf("the example should show both kinds: %+v", cfg)
	}
}

func TestExpandEnv(t *testing.T) {
	t.Parallel()

	lookup := env(map[string]string{"A": "1", "B_2": "two"})
	for in, want := range map[string]string{
		"plain": "plain", "${A}": "1", "x${A}y${B_2}": "x1ytwo", "$$": "$", "$A": "$A", "$": "$", "a$": "a$", "$${A}": "${A}",
	} {
		got, err := expandEnv(in, lookup)
		if err != nil || got != want {
			t.Errorf("expandEnv(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"${}", "${1A}", "${A", "${C}", "${A-B}"} {
		if _, err := expandEnv(in, lookup); err == nil {
			t.Errorf("expandEnv(%q) accepted", in)
		}
	}
}

func TestChildEnv(t *testing.T) {
	t.Parallel()

	lookup := env(map[string]string{"PATH": "/bin", "HOME": "/h", "OPENAI_API_KEY": "secret"})
	environ := func() []string { return []string{"PATH=/bin", "HOME=/h", "OPENAI_API_KEY=secret"} }
	got := strings.Join(childEnv(&StdioConfig{Env: map[string]string{"X": "1"}}, lookup, environ), " ")
	if got != "PATH=/bin HOME=/h X=1" {
		t.Errorf("default env = %q", got)
	}
	got = strings.Join(childEnv(&StdioConfig{InheritEnv: true, Env: map[string]string{"HOME": "/other"}}, lookup, environ), " ")
	if got != "PATH=/bin HOME=/h OPENAI_API_KEY=secret HOME=/other" {
		t.Errorf("inherited env = %q", got)
	}
}
