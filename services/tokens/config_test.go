package tokens

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

func TestExampleConfigLoads(t *testing.T) {
	t.Parallel()

	path := filepath.Join("..", "..", "examples", "config", "token_encoders.yaml")
	cfg, err := LoadConfigFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Encoders) == 0 || len(cfg.Models) == 0 {
		t.Fatalf("example has %d encoders and %d models", len(cfg.Encoders), len(cfg.Models))
	}
	enc, meta := cfg.merge(defaultEncoders(), defaultModelMetadata())
	r := NewRegistry(enc, meta)
	res := r.Resolve("my-custom-model-7b")
	if res.Config.SafetyMargin != 1.3 || res.Config.Family != baagentv1.ModelFamily_MODEL_FAMILY_CUSTOM || res.Meta.ContextLength != 32768 || !res.Meta.SupportsJSONMode {
		t.Fatalf("my-custom-model-7b resolved to %+v", res)
	}
	if res := r.Resolve("claude-3-sonnet"); res.Match != baagentv1.ModelMatch_MODEL_MATCH_EXACT || res.Config.SafetyMargin != 1.15 {
		t.Fatalf("claude-3-sonnet resolved to %+v", res)
	}
}

func TestParseConfigErrors(t *testing.T) {
	t.Parallel()

	for name, c := range map[string]struct{ yaml, want string }{
		"margin below 1": {"encoders:\n  m1:\n    model_family: gpt\n    encoding_name: cl100k_base\n    safety_margin: 0.9\n",
			`encoders["m1"]: safety_margin 0.9 must be between 1.0`},
		"unknown encoding": {"encoders:\n  my-custom-model:\n    model_family: custom\n    encoding_name: my_custom_encoding\n",
			`encoders["my-custom-model"]: encoding_name "my_custom_encoding" is not one of o200k_base`},
		"unknown family":  {"encoders:\n  m:\n    model_family: bard\n    encoding_name: cl100k_base\n", `model_family "bard"`},
		"unknown key":     {"encoders:\n  m:\n    model_family: gpt\n    encoding_name: cl100k_base\n    safety_margn: 1.1\n", "safety_margn"},
		"unknown section": {"encoder:\n  m: {}\n", "field encoder not found"},
		"exact without api": {"encoders:\n  m:\n    model_family: claude\n    encoding_name: cl100k_base\n    use_exact_counting: true\n",
			"use_exact_counting needs exact_counting_api"},
		"bad api url":          {"encoders:\n  m:\n    model_family: claude\n    encoding_name: cl100k_base\n    exact_counting_api: ftp://x\n", "must be an http or https URL"},
		"empty entry":          {"encoders:\n  m:\n", `encoders["m"]: empty entry`},
		"case duplicate":       {"encoders:\n  M:\n    model_family: gpt\n    encoding_name: cl100k_base\n  m:\n    model_family: gpt\n    encoding_name: cl100k_base\n", "duplicate"},
		"bad key":              {"encoders:\n  \"a b\":\n    model_family: gpt\n    encoding_name: cl100k_base\n", "key must be"},
		"output above context": {"models:\n  m:\n    context_length: 100\n    max_output_tokens: 200\n", `models["m"]: max_output_tokens 200 exceeds context_length 100`},
		"negative price":       {"models:\n  m:\n    input_cost_per_1m: -1\n", "input_cost_per_1m -1"},
		"not yaml":             {"encoders: [", "parse"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := ParseConfig([]byte(c.yaml))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error = %v, want it to contain %q", err, c.want)
			}
		})
	}
}

func TestParseConfigReportsEveryEntry(t *testing.T) {
	t.Parallel()

	_, err := ParseConfig([]byte("encoders:\n  a:\n    model_family: gpt\n    encoding_name: x\n  b:\n    model_family: gpt\n    encoding_name: cl100k_base\n    safety_margin: 0.5\n"))
	if err == nil || !strings.Contains(err.Error(), `encoders["a"]`) || !strings.Contains(err.Error(), `encoders["b"]`) {
		t.Fatalf("error = %v, want both entries named", err)
	}
}

func TestParseConfigEmptyAndDefaults(t *testing.T) {
	t.Parallel()

	cfg, err := ParseConfig(nil)
	if err != nil || len(cfg.Encoders) != 0 {
		t.Fatalf("empty document: %+v, %v", cfg, err)
	}
	cfg, err = ParseConfig([]byte("encoders:\n  m:\n    model_family: MISTAL\n    encoding_name: o200k_base\nmodels:\n  m:\n"))
	if err != nil {
		t.Fatal(err)
	}
	if e := cfg.Encoders["m"]; e.SafetyMargin != 1.0 || e.Family != baagentv1.ModelFamily_MODEL_FAMILY_MISTRAL {
		t.Errorf("defaults not applied: %+v", e)
	}
	if m := cfg.Models["m"]; m.ContextLength != 128000 || m.MaxOutputTokens != 4096 || !m.SupportsStreaming {
		t.Errorf("metadata defaults not applied: %+v", m)
	}
}

func TestLoadConfigFileErrors(t *testing.T) {
	t.Parallel()

	dir := t.TempDir()
	if _, err := LoadConfigFile(filepath.Join(dir, "missing.yaml")); err == nil {
		t.Error("missing file loaded")
	}
	big := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(big, []byte("#"+strings.Repeat("x", MaxConfigBytes)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadConfigFile(big); err == nil || !strings.Contains(err.Error(), "big.yaml") {
		t.Errorf("oversize file: %v", err)
	}
}

// FuzzParseConfig: no document makes the parser panic, and what it accepts
// builds a registry that resolves.
func FuzzParseConfig(f *testing.F) {
	if b, err := os.ReadFile(filepath.Join("..", "..", "examples", "config", "token_encoders.yaml")); err == nil {
		f.Add(b)
	}
	f.Add([]byte("encoders:\n  a*:\n    model_family: gpt\n    encoding_name: cl100k_base\n    safety_margin: 1.5\n"))
	f.Add([]byte("models:\n  m:\n    context_length: 5\n    max_output_tokens: 1\n    capabilities: [a]\n"))
	f.Add([]byte("&a [*a, *a]"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := ParseConfig(data)
		if err != nil {
			return
		}
		for key, e := range cfg.Encoders {
			if e.SafetyMargin < 1 {
				t.Fatalf("accepted margin %v for %q", e.SafetyMargin, key)
			}
		}
		enc, meta := cfg.merge(defaultEncoders(), defaultModelMetadata())
		r := NewRegistry(enc, meta)
		for key := range cfg.Encoders {
			_ = r.Resolve(key)
		}
	})
}
