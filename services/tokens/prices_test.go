package tokens

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/services/tokens/pricetable"
)

func pricedRegistry(t *testing.T, encoders map[string]EncoderConfig, models map[string]ModelMetadata) *Registry {
	t.Helper()
	prices, err := pricetable.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	return NewRegistry(encoders, models).WithPrices(pricetable.NewTable(prices))
}

func TestResolvePrices(t *testing.T) {
	t.Parallel()

	r := pricedRegistry(t, defaultEncoders(), defaultModelMetadata())
	for _, c := range []struct {
		model, key        string
		input, output     float64
		cached            float64 // -1: none
		limit             int64
		contextFromPreset int64
	}{
		{"gpt-4o", "gpt-4o", 2.5, 10, 1.25, 0, 128_000},
		{"GPT-4o-2024-08-06", "gpt-4o", 2.5, 10, 1.25, 0, 0},
		{"gpt-4o-2024-05-13", "gpt-4o-2024-05-13", 5, 15, -1, 0, 0},
		{"openai/gpt-4o-mini", "gpt-4o-mini", 0.15, 0.6, 0.075, 0, 0},
		{"claude-3-5-sonnet-20241022", "claude-3-5-sonnet", 3, 15, 0.3, 0, 200_000},
		{"anthropic/claude-sonnet-4-5-20250929", "claude-sonnet-4-5", 3, 15, 0.3, 200_000, 0},
		{"gemini-2.5-pro", "gemini-2.5-pro", 1.25, 10, 0.31, 200_000, 0},
		{"models/gemini-1.5-pro-002", "gemini-1.5-pro", 1.25, 5, 0.3125, 128_000, 0},
		{"deepseek-reasoner", "deepseek-reasoner", 0.28, 0.42, 0.028, 0, 0},
		{"qwen-max-latest", "qwen-max", 1.6, 6.4, -1, 0, 0},
	} {
		res := r.Resolve(c.model)
		m := res.Meta
		if res.PriceKey != c.key || m.InputCostPer1M == nil || *m.InputCostPer1M != c.input || m.OutputCostPer1M == nil || *m.OutputCostPer1M != c.output ||
			m.PriceMaxPromptTokens != c.limit || m.PriceAsOf == "" {
			t.Errorf("%s: key %q, meta %+v", c.model, res.PriceKey, m)
			continue
		}
		if (c.cached < 0) != (m.CachedInputCostPer1M == nil) || (c.cached >= 0 && *m.CachedInputCostPer1M != c.cached) {
			t.Errorf("%s: cached price %v, want %v", c.model, m.CachedInputCostPer1M, c.cached)
		}
		// A price does not change the preset's context length.
		if c.contextFromPreset != 0 && m.ContextLength != c.contextFromPreset {
			t.Errorf("%s: context length %d, want %d", c.model, m.ContextLength, c.contextFromPreset)
		}
	}
	for _, model := range []string{"unknown-model", "glm-4-plus", "gpt-3.5-turbo-0613", "gpt-4o-realtime-preview", "llama-3.1-8b"} {
		if res := r.Resolve(model); res.PriceKey != "" || res.Meta.hasPrice() || res.Meta.PriceAsOf != "" {
			t.Errorf("%s: priced %+v under %q", model, res.Meta, res.PriceKey)
		}
	}
}

func TestOperatorPricesWin(t *testing.T) {
	t.Parallel()

	cfg, err := ParseConfig([]byte(`models:
  gpt-4o:
    input_cost_per_1m: 2
    output_cost_per_1m: 8
  gpt-4.1:
    context_length: 1047576
    max_output_tokens: 32768
  house-*:
    input_cost_per_1m: 0.5
    cached_input_cost_per_1m: 0.1
    output_cost_per_1m: 1
    price_as_of: "2025-03-01"
    price_max_prompt_tokens: 32000
`))
	if err != nil {
		t.Fatal(err)
	}
	enc, meta := cfg.merge(defaultEncoders(), defaultModelMetadata())
	r := pricedRegistry(t, enc, meta)

	// The operator's price replaces the built-in one entirely: no cached
	// price or date is carried over from the table.
	res := r.Resolve("gpt-4o")
	if res.PriceKey != "gpt-4o" || *res.Meta.InputCostPer1M != 2 || *res.Meta.OutputCostPer1M != 8 || res.Meta.CachedInputCostPer1M != nil || res.Meta.PriceAsOf != "" {
		t.Errorf("gpt-4o: %+v under %q", res.Meta, res.PriceKey)
	}
	// An operator entry without a price keeps its metadata and takes the
	// built-in price.
	if r := r.Resolve("gpt-4.1"); r.PriceKey != "gpt-4.1" || *r.Meta.InputCostPer1M != 2 || r.Meta.ContextLength != 1047576 {
		t.Errorf("gpt-4.1: %+v under %q", r.Meta, r.PriceKey)
	}
	// The snapshot takes the built-in price of its base name.
	if r := r.Resolve("gpt-4.1-2025-04-14"); r.PriceKey != "gpt-4.1" || *r.Meta.OutputCostPer1M != 8 {
		t.Errorf("gpt-4.1 snapshot: %+v under %q", r.Meta, r.PriceKey)
	}
	// A priced pattern is its own price key: a bounded name.
	res = r.Resolve("house-model-7b")
	if res.PriceKey != "house-*" || *res.Meta.CachedInputCostPer1M != 0.1 || res.Meta.PriceAsOf != "2025-03-01" || res.Meta.PriceMaxPromptTokens != 32000 {
		t.Errorf("house-model-7b: %+v under %q", res.Meta, res.PriceKey)
	}
}

func TestParseConfigPriceErrors(t *testing.T) {
	t.Parallel()

	for name, c := range map[string]struct{ yaml, want string }{
		"negative cached": {"models:\n  m:\n    cached_input_cost_per_1m: -0.5\n", "cached_input_cost_per_1m -0.5"},
		"NaN output":      {"models:\n  m:\n    output_cost_per_1m: .nan\n", "output_cost_per_1m NaN"},
		"bad date":        {"models:\n  m:\n    price_as_of: 2025-13-01\n", `price_as_of: "2025-13-01" is not a date`},
		"negative limit":  {"models:\n  m:\n    price_max_prompt_tokens: -1\n", "price_max_prompt_tokens -1"},
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

func TestModelInfoPricesRPC(t *testing.T) {
	t.Parallel()

	file := filepath.Join(t.TempDir(), "token_encoders.yaml")
	if err := os.WriteFile(file, []byte("models:\n  qwen-plus:\n    input_cost_per_1m: 0.3\n    output_cost_per_1m: 0.9\n    price_as_of: \"2025-06-01\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := serve(t, newTestServer(t, Options{EncodersFile: file}))
	ctx := t.Context()

	info, err := c.GetModelInfo(ctx, &baagentv1.GetModelInfoRequest{Model: "gpt-4o-2024-08-06"})
	if err != nil {
		t.Fatal(err)
	}
	md := info.GetInfo().GetMetadata()
	if info.GetInfo().GetModel() != "gpt-4o-2024-08-06" || md.GetName() != "gpt-4o" || md.GetInputCostPer_1M() != 2.5 || md.GetCachedInputCostPer_1M() != 1.25 ||
		md.GetOutputCostPer_1M() != 10 || md.GetPriceAsOf() != "2024-10-01" || md.GetPriceMaxPromptTokens() != 0 {
		t.Errorf("gpt-4o snapshot: %v", info.GetInfo())
	}
	info, err = c.GetModelInfo(ctx, &baagentv1.GetModelInfoRequest{Model: "gemini-2.5-pro"})
	if err != nil || info.GetInfo().GetMetadata().GetPriceMaxPromptTokens() != 200_000 {
		t.Errorf("gemini-2.5-pro: %v, %v", info.GetInfo(), err)
	}
	info, err = c.GetModelInfo(ctx, &baagentv1.GetModelInfoRequest{Model: "qwen-plus"})
	if md := info.GetInfo().GetMetadata(); err != nil || md.GetInputCostPer_1M() != 0.3 || md.GetPriceAsOf() != "2025-06-01" || md.GetPriceMaxPromptTokens() != 0 {
		t.Errorf("qwen-plus with the operator's price: %v, %v", info.GetInfo(), err)
	}
	info, err = c.GetModelInfo(ctx, &baagentv1.GetModelInfoRequest{Model: "my-model"})
	if md := info.GetInfo().GetMetadata(); err != nil || md.GetName() != "my-model" || md.InputCostPer_1M != nil || md.CachedInputCostPer_1M != nil || md.GetPriceAsOf() != "" {
		t.Errorf("unpriced model: %v, %v", info.GetInfo(), err)
	}

	// ListModels lists the price table's models with their prices.
	list, err := c.ListModels(ctx, &baagentv1.ListModelsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]*baagentv1.ModelMetadata{}
	for _, m := range list.GetModels() {
		found[m.GetModel()] = m.GetMetadata()
	}
	for _, name := range []string{"deepseek-reasoner", "claude-3-haiku", "gpt-4", "o3-mini"} {
		if md, ok := found[name]; !ok || md.InputCostPer_1M == nil || md.GetPriceAsOf() == "" {
			t.Errorf("ListModels: %s = %v (listed %v)", name, md, ok)
		}
	}
	if md := found["gpt-*"]; md.InputCostPer_1M != nil {
		t.Errorf("the pattern gpt-* is priced: %v", md)
	}
}
