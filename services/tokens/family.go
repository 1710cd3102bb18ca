package tokens

import (
	"strings"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// familyNames are the ModelFamily values as spelt in
// token_encoders.yaml. The misspelling "mistal" is accepted as
// an alias so that files written with it load.
var familyNames = map[string]baagentv1.ModelFamily{
	"claude":   baagentv1.ModelFamily_MODEL_FAMILY_CLAUDE,
	"gpt":      baagentv1.ModelFamily_MODEL_FAMILY_GPT,
	"gemini":   baagentv1.ModelFamily_MODEL_FAMILY_GEMINI,
	"glm":      baagentv1.ModelFamily_MODEL_FAMILY_GLM,
	"qwen":     baagentv1.ModelFamily_MODEL_FAMILY_QWEN,
	"llama":    baagentv1.ModelFamily_MODEL_FAMILY_LLAMA,
	"mistral":  baagentv1.ModelFamily_MODEL_FAMILY_MISTRAL,
	"mistal":   baagentv1.ModelFamily_MODEL_FAMILY_MISTRAL,
	"deepseek": baagentv1.ModelFamily_MODEL_FAMILY_DEEPSEEK,
	"custom":   baagentv1.ModelFamily_MODEL_FAMILY_CUSTOM,
}

// familyName is the token_encoders.yaml name of f ("claude"), "custom" for anything
// unknown.
func familyName(f baagentv1.ModelFamily) string {
	switch f {
	case baagentv1.ModelFamily_MODEL_FAMILY_CLAUDE:
		return "claude"
	case baagentv1.ModelFamily_MODEL_FAMILY_GPT:
		return "gpt"
	case baagentv1.ModelFamily_MODEL_FAMILY_GEMINI:
		return "gemini"
	case baagentv1.ModelFamily_MODEL_FAMILY_GLM:
		return "glm"
	case baagentv1.ModelFamily_MODEL_FAMILY_QWEN:
		return "qwen"
	case baagentv1.ModelFamily_MODEL_FAMILY_LLAMA:
		return "llama"
	case baagentv1.ModelFamily_MODEL_FAMILY_MISTRAL:
		return "mistral"
	case baagentv1.ModelFamily_MODEL_FAMILY_DEEPSEEK:
		return "deepseek"
	default:
		return "custom"
	}
}

// familyHints recognise a family from a substring of a lower-cased model name
// (family detection, docs/concepts/tokens.md). Versioned prefixes
// ("claude-3", "gpt-4") would miss; these are the family stems instead, so that newer
// versions (claude-sonnet-4-5, qwen3, llama4) and the names served by vLLM,
// Ollama or routers (meta-llama/Llama-3.1-8B, qwen2.5:7b) are recognised too.
// The order matters only for names holding two stems; more specific first.
var familyHints = []struct {
	substr string
	family baagentv1.ModelFamily
}{
	{"claude", baagentv1.ModelFamily_MODEL_FAMILY_CLAUDE},
	{"deepseek", baagentv1.ModelFamily_MODEL_FAMILY_DEEPSEEK},
	{"gemini", baagentv1.ModelFamily_MODEL_FAMILY_GEMINI},
	{"glm", baagentv1.ModelFamily_MODEL_FAMILY_GLM},
	{"qwen", baagentv1.ModelFamily_MODEL_FAMILY_QWEN},
	{"qwq", baagentv1.ModelFamily_MODEL_FAMILY_QWEN},
	{"llama", baagentv1.ModelFamily_MODEL_FAMILY_LLAMA},
	{"mistral", baagentv1.ModelFamily_MODEL_FAMILY_MISTRAL},
	{"mixtral", baagentv1.ModelFamily_MODEL_FAMILY_MISTRAL},
	{"codestral", baagentv1.ModelFamily_MODEL_FAMILY_MISTRAL},
	{"ministral", baagentv1.ModelFamily_MODEL_FAMILY_MISTRAL},
	{"pixtral", baagentv1.ModelFamily_MODEL_FAMILY_MISTRAL},
	{"gpt", baagentv1.ModelFamily_MODEL_FAMILY_GPT},
}

// detectFamily returns the family whose stem occurs in the lower-cased name,
// MODEL_FAMILY_CUSTOM when none does.
func detectFamily(lower string) baagentv1.ModelFamily {
	for _, h := range familyHints {
		if strings.Contains(lower, h.substr) {
			return h.family
		}
	}
	return baagentv1.ModelFamily_MODEL_FAMILY_CUSTOM
}
