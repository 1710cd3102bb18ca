package toolrunner

import (
	"strings"
	"testing"
	"time"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/services/toolrunner/tool"
)

const sampleTools = `
providers:
  - name: py
    address: localhost:9000
mcp_servers:
  fs: {command: npx}
policies:
  defaults:
    permission: allow
    timeout: 60s
    output_level: standard
    cache: no_cache
    retry:
      max_retries: 2
      initial_delay: 500ms
  tools:
    file_write: {permission: ask}
    sql_query:
      timeout: 45s
      cache: ttl_short
      output_level: full
    "mcp__*": {permission: ask, timeout: 30s}
    "mcp__fs__*":
      permission: deny
      retry: {max_retries: 0, retry_on: [timeout]}
`

func TestParsePolicies(t *testing.T) {
	t.Parallel()

	ps, err := ParsePolicies([]byte(sampleTools))
	if err != nil {
		t.Fatal(err)
	}
	sql := ps.resolve(tool.Spec{Name: "sql_query"})
	if sql.timeout != 45*time.Second || sql.cache != baagentv1.ToolCachePolicy_TOOL_CACHE_POLICY_TTL_SHORT ||
		sql.toolLevel != baagentv1.OutputLevel_OUTPUT_LEVEL_FULL || sql.retry.MaxRetries != 2 || sql.retry.InitialDelay != 500*time.Millisecond ||
		sql.permission != baagentv1.ToolPermission_TOOL_PERMISSION_ALLOW {
		t.Errorf("sql_query: %+v", sql)
	}
	if w := ps.resolve(tool.Spec{Name: "file_write"}); w.permission != baagentv1.ToolPermission_TOOL_PERMISSION_ASK || w.timeout != time.Minute {
		t.Errorf("file_write: %+v", w)
	}
	// The longest matching glob wins.
	fs := ps.resolve(tool.Spec{Name: "mcp__fs__read"})
	if fs.permission != baagentv1.ToolPermission_TOOL_PERMISSION_DENY || fs.retry.MaxRetries != 0 || fs.timeout != time.Minute {
		t.Errorf("mcp__fs__read: %+v", fs)
	}
	if gh := ps.resolve(tool.Spec{Name: "mcp__gh__search"}); gh.permission != baagentv1.ToolPermission_TOOL_PERMISSION_ASK || gh.timeout != 30*time.Second {
		t.Errorf("mcp__gh__search: %+v", gh)
	}
	// Spec values sit between the defaults and the per-tool entries.
	spec := tool.Spec{Name: "x", Timeout: 5 * time.Second, CachePolicy: baagentv1.ToolCachePolicy_TOOL_CACHE_POLICY_TTL_LONG}
	if e := ps.resolve(spec); e.timeout != 5*time.Second || e.cache != baagentv1.ToolCachePolicy_TOOL_CACHE_POLICY_TTL_LONG {
		t.Errorf("spec layer: %+v", e)
	}
	// No policies at all: the built-in defaults.
	none, err := ParsePolicies([]byte("providers: []\n"))
	if err != nil {
		t.Fatal(err)
	}
	if e := none.resolve(tool.Spec{Name: "x"}); e.timeout != DefaultTimeout || e.retry.MaxRetries != 3 || len(e.retry.RetryOn) != 4 ||
		e.cache != baagentv1.ToolCachePolicy_TOOL_CACHE_POLICY_NO_CACHE || e.permission != baagentv1.ToolPermission_TOOL_PERMISSION_ALLOW {
		t.Errorf("defaults: %+v", e)
	}
	if _, err := ParsePolicies(nil); err != nil {
		t.Errorf("empty file: %v", err)
	}
}

func TestParsePoliciesErrors(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct{ yaml, want string }{
		{"polices: {}\n", "polices"},
		{"policies:\n  tool: {}\n", "tool"},
		{"policies:\n  tools:\n    x: {permision: ask}\n", "permision"},
		{"policies:\n  tools:\n    x: {permission: maybe}\n", "policies.tools.x.permission"},
		{"policies:\n  tools:\n    x: {output_level: loud}\n", "policies.tools.x.output_level"},
		{"policies:\n  tools:\n    x: {cache: forever}\n", "policies.tools.x.cache"},
		{"policies:\n  tools:\n    x: {timeout: 10m}\n", "policies.tools.x.timeout"},
		{"policies:\n  tools:\n    x: {retry: {retry_on: [not_found]}}\n", "policies.tools.x.retry.retry_on[0]"},
		{"policies:\n  tools:\n    x: {retry: {max_retries: 11}}\n", "policies.tools.x.retry.max_retries"},
		{"policies:\n  tools:\n    x: {retry: {backoff_multiplier: 0.5}}\n", "policies.tools.x.retry.backoff_multiplier"},
		{"policies:\n  tools:\n    \"a/b\": {}\n", "policies.tools.a/b"},
		{"policies:\n  defaults: {timeout: fast}\n", "fast"},
	} {
		_, err := ParsePolicies([]byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want it to name %q", tc.yaml, err, tc.want)
		}
	}
}

// FuzzParsePolicies: any input parses or fails with an error, never a panic,
// and a parsed policy resolves to sane values.
func FuzzParsePolicies(f *testing.F) {
	f.Add([]byte(sampleTools))
	f.Add([]byte("policies:\n  tools:\n    x: {retry: {retry_on: [timeout, rate_limit]}}\n"))
	f.Add([]byte("policies: [1, 2]\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		ps, err := ParsePolicies(b)
		if err != nil {
			return
		}
		for name := range ps.Tools {
			e := ps.resolve(tool.Spec{Name: name})
			if e.timeout <= 0 || e.timeout > DefaultMaxTimeout || e.retry.MaxRetries < 0 || e.retry.MaxRetries > MaxRetries {
				t.Fatalf("%s resolved to %+v", name, e)
			}
			for _, typ := range e.retry.RetryOn {
				if !tool.Retryable(typ) {
					t.Fatalf("%s retries %v", name, typ)
				}
			}
		}
	})
}
