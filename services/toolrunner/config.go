package toolrunner

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/validate"
)

// toolsFile is the tools file (-tools-file). The toolrunner core reads
// `policies:`, `hooks:` and `compositions:` (compose.go); `providers:` and
// `mcp_servers:` belong to the external tool managers and are accepted here
// without being interpreted. Any other key is an error.
type toolsFile struct {
	Policies     *policiesYAML     `yaml:"policies"`
	Compositions []compositionYAML `yaml:"compositions"`
	Providers    yaml.Node         `yaml:"providers"`
	MCPServers   yaml.Node         `yaml:"mcp_servers"`
	Hooks        []hookYAML        `yaml:"hooks"`
}

type policiesYAML struct {
	Defaults *toolPolicyYAML           `yaml:"defaults"`
	Tools    map[string]toolPolicyYAML `yaml:"tools"`
}

type toolPolicyYAML struct {
	Permission  string        `yaml:"permission"`
	Timeout     time.Duration `yaml:"timeout"`
	OutputLevel string        `yaml:"output_level"`
	Cache       string        `yaml:"cache"`
	Retry       *retryYAML    `yaml:"retry"`
}

type retryYAML struct {
	MaxRetries        *int32        `yaml:"max_retries"`
	RetryOn           []string      `yaml:"retry_on"`
	BackoffMultiplier float64       `yaml:"backoff_multiplier"`
	InitialDelay      time.Duration `yaml:"initial_delay"`
	MaxDelay          time.Duration `yaml:"max_delay"`
	TimeoutMultiplier float64       `yaml:"timeout_multiplier"`
	MaxTimeout        time.Duration `yaml:"max_timeout"`
}

// LoadPolicies reads the `policies:` section of a tools file; a missing
// section is no policies. Unknown keys anywhere in the file's top level or
// in `policies:` are errors naming the key.
func LoadPolicies(file string) (Policies, error) { return loadSection(file, ParsePolicies) }

// loadSection reads a tools file and parses one of its sections with
// parse; errors name the file.
func loadSection[T any](file string, parse func([]byte) (T, error)) (T, error) {
	var zero T
	b, err := os.ReadFile(file)
	if err != nil {
		return zero, fmt.Errorf("tools file: %w", err)
	}
	v, err := parse(b)
	if err != nil {
		return zero, fmt.Errorf("tools file %s: %w", file, err)
	}
	return v, nil
}

// decodeToolsFile decodes a whole tools file, refusing unknown keys; an
// empty file has no sections.
func decodeToolsFile(b []byte) (toolsFile, error) {
	var f toolsFile
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return toolsFile{}, err
	}
	return f, nil
}

// ParsePolicies decodes the `policies:` section of a tools file.
func ParsePolicies(b []byte) (Policies, error) {
	f, err := decodeToolsFile(b)
	if err != nil {
		return Policies{}, err
	}
	ps := Policies{Tools: map[string]ToolPolicy{}}
	if f.Policies == nil {
		return ps, nil
	}
	var e validate.Errors
	if d := f.Policies.Defaults; d != nil {
		ps.Defaults = d.convert(&e, "policies.defaults")
	}
	for name, t := range f.Policies.Tools {
		field := "policies.tools." + name
		validate.ToolPattern(&e, field, name)
		ps.Tools[name] = t.convert(&e, field)
	}
	if e.Len() > 0 {
		var msgs []string
		for _, v := range e.Violations() {
			msgs = append(msgs, v.GetField()+": "+v.GetDescription())
		}
		return Policies{}, errors.New(strings.Join(msgs, "; "))
	}
	return ps, nil
}

func (t toolPolicyYAML) convert(e *validate.Errors, f string) ToolPolicy {
	var p ToolPolicy
	p.Permission = enumValue[baagentv1.ToolPermission](e, f+".permission", t.Permission, "TOOL_PERMISSION_", baagentv1.ToolPermission_value, "allow, deny, ask")
	p.OutputLevel = enumValue[baagentv1.OutputLevel](e, f+".output_level", t.OutputLevel, "OUTPUT_LEVEL_", baagentv1.OutputLevel_value, "brief, standard, full")
	p.CachePolicy = enumValue[baagentv1.ToolCachePolicy](e, f+".cache", t.Cache, "TOOL_CACHE_POLICY_", baagentv1.ToolCachePolicy_value, "no_cache, cacheable, ttl_short, ttl_medium, ttl_long")
	if t.Timeout < 0 || t.Timeout > DefaultMaxTimeout {
		e.Addf(f+".timeout", "must be between 0 and %s, got %s", DefaultMaxTimeout, t.Timeout)
	}
	p.Timeout = t.Timeout
	if r := t.Retry; r != nil {
		rp := &baagentv1.ToolRetryPolicy{
			MaxRetries: r.MaxRetries, BackoffMultiplier: r.BackoffMultiplier,
			InitialDelayMs: r.InitialDelay.Milliseconds(), MaxDelayMs: r.MaxDelay.Milliseconds(),
			TimeoutMultiplier: r.TimeoutMultiplier, MaxTimeoutMs: r.MaxTimeout.Milliseconds(),
		}
		for i, name := range r.RetryOn {
			v := enumValue[baagentv1.ToolErrorType](e, validate.Index(f+".retry.retry_on", i), name, "TOOL_ERROR_TYPE_", baagentv1.ToolErrorType_value, "timeout, rate_limit, resource_error, transient_error")
			rp.RetryOn = append(rp.RetryOn, v)
		}
		retryPolicy(e, f+".retry", rp)
		p.Retry = rp
	}
	return p
}

// enumValue parses a lowercase enum name (`ask`, `ttl_short`) into T; empty
// is the zero value.
func enumValue[T ~int32](e *validate.Errors, field, v, prefix string, values map[string]int32, want string) T {
	if v == "" {
		return 0
	}
	n, ok := values[prefix+strings.ToUpper(v)]
	if !ok || n == 0 {
		e.Addf(field, "must be one of %s, got %q", want, v)
		return 0
	}
	return T(n)
}
