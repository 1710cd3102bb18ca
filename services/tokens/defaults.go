package tokens

import (
	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/services/tokens/encoding"
)

// Safety margins (docs/concepts/tokens.md): Claude 1.15, GPT 1.0, Gemini 1.2, GLM 1.25,
// Qwen 1.2 and the unknown-model fallback 1.2. Llama, Mistral and
// DeepSeek have no margin of their own; they take the conservative
// fallback margin rather than a number of our own.
const (
	marginExact        = 1.0
	marginClaude       = 1.15
	marginGemini       = 1.2
	marginGLM          = 1.25
	marginQwen         = 1.2
	marginConservative = 1.2
)

// defaultEncoders is the built-in registry, before token_encoders.yaml.
//
// OpenAI models use their own encodings, exactly (as tiktoken's
// model.py maps them): o200k_base for gpt-4o, gpt-4.1, gpt-4.5, gpt-5 and the
// o-series; cl100k_base for gpt-4, gpt-3.5 and the second-generation
// embeddings and base models; p50k_base and r50k_base for the GPT-3 era
// models. "gpt-*" catches future GPT names with the current encoding.
//
// Families whose tokenizer is not public are counted with cl100k_base
// times their margin, and marked as estimates. The family entries
// are keyed "<family>-*", which family detection looks up.
func defaultEncoders() map[string]EncoderConfig {
	gpt := func(enc string) EncoderConfig {
		return EncoderConfig{Family: baagentv1.ModelFamily_MODEL_FAMILY_GPT, Encoding: enc, SafetyMargin: marginExact}
	}
	estimate := func(f baagentv1.ModelFamily, margin float64) EncoderConfig {
		return EncoderConfig{Family: f, Encoding: encoding.Cl100kBase, SafetyMargin: margin}
	}
	m := map[string]EncoderConfig{
		"claude-*":   estimate(baagentv1.ModelFamily_MODEL_FAMILY_CLAUDE, marginClaude),
		"gemini-*":   estimate(baagentv1.ModelFamily_MODEL_FAMILY_GEMINI, marginGemini),
		"glm-*":      estimate(baagentv1.ModelFamily_MODEL_FAMILY_GLM, marginGLM),
		"qwen-*":     estimate(baagentv1.ModelFamily_MODEL_FAMILY_QWEN, marginQwen),
		"llama-*":    estimate(baagentv1.ModelFamily_MODEL_FAMILY_LLAMA, marginConservative),
		"mistral-*":  estimate(baagentv1.ModelFamily_MODEL_FAMILY_MISTRAL, marginConservative),
		"deepseek-*": estimate(baagentv1.ModelFamily_MODEL_FAMILY_DEEPSEEK, marginConservative),

		"gpt-*": gpt(encoding.O200kBase),
	}
	for _, k := range []string{"gpt-4o*", "chatgpt-4o*", "gpt-4.1*", "gpt-4.5*", "gpt-5*", "o1", "o1-*", "o3", "o3-*", "o4-*"} {
		m[k] = gpt(encoding.O200kBase)
	}
	for _, k := range []string{"gpt-4", "gpt-4-*", "gpt-3.5*", "gpt-35*", "ft:gpt-4*", "ft:gpt-3.5*",
		"text-embedding-ada-002", "text-embedding-3-*", "davinci-002", "babbage-002", "ft:davinci-002*", "ft:babbage-002*"} {
		m[k] = gpt(encoding.Cl100kBase)
	}
	for _, k := range []string{"text-davinci-003", "text-davinci-002", "code-davinci-002", "code-davinci-001",
		"code-cushman-002", "code-cushman-001", "davinci-codex", "cushman-codex"} {
		m[k] = gpt(encoding.P50kBase)
	}
	for _, k := range []string{"text-davinci-001", "text-curie-001", "text-babbage-001", "text-ada-001",
		"davinci", "curie", "babbage", "ada", "text-similarity-*-001", "text-search-*-001", "code-search-*-001"} {
		m[k] = gpt(encoding.R50kBase)
	}
	return m
}

// defaultModelMetadata is the table of preset models: context length
// and maximum output only. Prices come from the built-in price table
// (package pricetable) or token_encoders.yaml. A dated snapshot of Claude 3.5 Sonnet
// (claude-3-5-sonnet-20241022) is the same model, hence the pattern.
func defaultModelMetadata() map[string]ModelMetadata {
	meta := func(ctx, out int64) ModelMetadata {
		m := defaultMetadata()
		m.ContextLength, m.MaxOutputTokens = ctx, out
		return m
	}
	return map[string]ModelMetadata{
		"gpt-4-turbo":         meta(128_000, 4_096),
		"gpt-4o":              meta(128_000, 16_384),
		"gemini-2.0-flash":    meta(1_048_576, 8_192),
		"gemini-1.5-pro":      meta(2_097_152, 8_192),
		"qwen-max":            meta(32_000, 8_192),
		"qwen-plus":           meta(131_072, 8_192),
		"deepseek-chat":       meta(64_000, 8_192),
		"claude-3-5-sonnet":   meta(200_000, 8_192),
		"claude-3-5-sonnet-*": meta(200_000, 8_192),
		// The built-in scripted model (internal/scripted) has a deliberately
		// small window so that its long-conversation scenario exercises
		// context compression on the sample data.
		"scripted": meta(16_384, 2_048),
	}
}
