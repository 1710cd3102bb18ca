package tokens

import (
	"testing"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

func defaultRegistry() *Registry {
	return NewRegistry(defaultEncoders(), defaultModelMetadata())
}

func TestResolve(t *testing.T) {
	t.Parallel()

	r := defaultRegistry()
	const (
		exact    = baagentv1.ModelMatch_MODEL_MATCH_EXACT
		pattern  = baagentv1.ModelMatch_MODEL_MATCH_PATTERN
		family   = baagentv1.ModelMatch_MODEL_MATCH_FAMILY
		fallback = baagentv1.ModelMatch_MODEL_MATCH_FALLBACK
		claude   = baagentv1.ModelFamily_MODEL_FAMILY_CLAUDE
		gpt      = baagentv1.ModelFamily_MODEL_FAMILY_GPT
		custom   = baagentv1.ModelFamily_MODEL_FAMILY_CUSTOM
	)
	for _, c := range []struct {
		model    string
		match    baagentv1.ModelMatch
		key      string
		family   baagentv1.ModelFamily
		encoding string
		margin   float64
	}{
		{"gpt-4o", pattern, "gpt-4o*", gpt, "o200k_base", 1.0},
		{"gpt-4o-mini", pattern, "gpt-4o*", gpt, "o200k_base", 1.0},
		{"GPT-4o-2024-08-06", pattern, "gpt-4o*", gpt, "o200k_base", 1.0},
		{"gpt-4.1-nano", pattern, "gpt-4.1*", gpt, "o200k_base", 1.0},
		{"gpt-5", pattern, "gpt-5*", gpt, "o200k_base", 1.0},
		{"o1", exact, "o1", gpt, "o200k_base", 1.0},
		{"o3-mini", pattern, "o3-*", gpt, "o200k_base", 1.0},
		{"o4-mini", pattern, "o4-*", gpt, "o200k_base", 1.0},
		{"gpt-4", exact, "gpt-4", gpt, "cl100k_base", 1.0},
		{"gpt-4-turbo", pattern, "gpt-4-*", gpt, "cl100k_base", 1.0},
		{"gpt-3.5-turbo", pattern, "gpt-3.5*", gpt, "cl100k_base", 1.0},
		{"text-embedding-3-small", pattern, "text-embedding-3-*", gpt, "cl100k_base", 1.0},
		{"text-davinci-003", exact, "text-davinci-003", gpt, "p50k_base", 1.0},
		{"davinci", exact, "davinci", gpt, "r50k_base", 1.0},
		{"gpt-6-preview", pattern, "gpt-*", gpt, "o200k_base", 1.0},
		{"openai/gpt-4o", pattern, "gpt-4o*", gpt, "o200k_base", 1.0},
		{"claude-sonnet-4-5", pattern, "claude-*", claude, "cl100k_base", 1.15},
		{"glm-4-plus", pattern, "glm-*", baagentv1.ModelFamily_MODEL_FAMILY_GLM, "cl100k_base", 1.25},
		{"gemini-2.0-flash", pattern, "gemini-*", baagentv1.ModelFamily_MODEL_FAMILY_GEMINI, "cl100k_base", 1.2},
		{"qwen-max", pattern, "qwen-*", baagentv1.ModelFamily_MODEL_FAMILY_QWEN, "cl100k_base", 1.2},
		// Family detection: no pattern matches these names.
		{"qwen2.5-72b-instruct", family, "qwen-*", baagentv1.ModelFamily_MODEL_FAMILY_QWEN, "cl100k_base", 1.2},
		{"anthropic.claude-3-haiku", family, "claude-*", claude, "cl100k_base", 1.15},
		{"meta-llama/Llama-3.1-8B-Instruct", pattern, "llama-*", baagentv1.ModelFamily_MODEL_FAMILY_LLAMA, "cl100k_base", 1.2},
		{"llama3.1:8b", family, "llama-*", baagentv1.ModelFamily_MODEL_FAMILY_LLAMA, "cl100k_base", 1.2},
		{"mixtral-8x7b", family, "mistral-*", baagentv1.ModelFamily_MODEL_FAMILY_MISTRAL, "cl100k_base", 1.2},
		{"deepseek-chat", pattern, "deepseek-*", baagentv1.ModelFamily_MODEL_FAMILY_DEEPSEEK, "cl100k_base", 1.2},
		{"chatglm3-6b", family, "glm-*", baagentv1.ModelFamily_MODEL_FAMILY_GLM, "cl100k_base", 1.25},
		{"my-model", fallback, "", custom, "cl100k_base", 1.2},
	} {
		res := r.Resolve(c.model)
		if res.Match != c.match || res.Key != c.key || res.Config.Family != c.family || res.Config.Encoding != c.encoding || res.Config.SafetyMargin != c.margin {
			t.Errorf("Resolve(%q) = %v %q %v %s %v; want %v %q %v %s %v", c.model,
				res.Match, res.Key, res.Config.Family, res.Config.Encoding, res.Config.SafetyMargin,
				c.match, c.key, c.family, c.encoding, c.margin)
		}
		if wantEstimate := c.family != gpt; res.Config.IsEstimate() != wantEstimate {
			t.Errorf("Resolve(%q).IsEstimate() = %v", c.model, res.Config.IsEstimate())
		}
	}
}

func TestResolveMetadata(t *testing.T) {
	t.Parallel()

	r := defaultRegistry()
	for model, want := range map[string][2]int64{
		"gpt-4o":                     {128_000, 16_384},
		"gemini-1.5-pro":             {2_097_152, 8_192},
		"claude-3-5-sonnet-20241022": {200_000, 8_192},
		"qwen-max":                   {32_000, 8_192},
		"unknown-model":              {128_000, 4_096}, // the defaults
	} {
		res := r.Resolve(model)
		if res.Meta.ContextLength != want[0] || res.Meta.MaxOutputTokens != want[1] {
			t.Errorf("%s: metadata %d/%d, want %d/%d", model, res.Meta.ContextLength, res.Meta.MaxOutputTokens, want[0], want[1])
		}
		if res.Meta.InputCostPer1M != nil || res.Meta.OutputCostPer1M != nil {
			t.Errorf("%s: a price appeared in a registry built without a price table", model)
		}
	}
	if r.Resolve("unknown-model").HasMeta || !r.Resolve("gpt-4o").HasMeta {
		t.Error("HasMeta wrong")
	}
}

func TestGlobMatch(t *testing.T) {
	t.Parallel()

	for _, c := range []struct {
		pattern, name string
		want          bool
	}{
		{"claude-*", "claude-3-opus", true},
		{"claude-*", "claude", false},
		{"gpt-4*", "gpt-4", true},
		{"gpt-4*", "gpt-4o", true},
		{"*/gpt-4o", "openai/gpt-4o", true},
		{"a*b*c", "axxbyyc", true},
		{"a*b*c", "axxbyy", false},
		{"o?", "o1", true},
		{"o?", "o12", false},
		{"中?", "中文", true},
		{"*", "", true},
		{"", "", true},
		{"a", "", false},
		{"*a*a*a*a*a*b", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", false},
	} {
		if got := globMatch(c.pattern, c.name); got != c.want {
			t.Errorf("globMatch(%q, %q) = %v", c.pattern, c.name, got)
		}
	}
}

func TestMostSpecificPatternWins(t *testing.T) {
	t.Parallel()

	r := NewRegistry(map[string]EncoderConfig{
		"x-*":          {Encoding: "r50k_base", SafetyMargin: 1},
		"x-long*":      {Encoding: "p50k_base", SafetyMargin: 1},
		"X-LONG-EXACT": {Encoding: "o200k_base", SafetyMargin: 1},
	}, nil)
	for model, want := range map[string]string{"x-a": "r50k_base", "x-longer": "p50k_base", "x-long-exact": "o200k_base"} {
		if got := r.Resolve(model).Config.Encoding; got != want {
			t.Errorf("%s -> %s, want %s", model, got, want)
		}
	}
	if keys := r.Keys(); len(keys) != 3 || keys[0] != "x-*" {
		t.Errorf("Keys() = %v", keys)
	}
}
