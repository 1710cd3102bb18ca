package tokens

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"os"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/baagent/baagent/services/tokens/encoding"
	"github.com/baagent/baagent/services/tokens/pricetable"
)

// MaxConfigBytes bounds a token_encoders.yaml file.
const MaxConfigBytes = 1 << 20

// maxMargin bounds safety_margin from above: a margin of 10 is already
// nonsense, so a larger one is taken for a typo (115 for 1.15).
const maxMargin = 10.0

// configFile is token_encoders.yaml: the `encoders` section, plus
// `models` for model metadata.
//
//	encoders:
//	  claude-3-sonnet:            # exact name or glob (claude-*, gpt-4*)
//	    model_family: claude
//	    encoding_name: cl100k_base
//	    safety_margin: 1.15
//	    use_exact_counting: false
//	models:
//	  gpt-4o:
//	    context_length: 128000
//	    max_output_tokens: 16384
//	    input_cost_per_1m: 2.5          # prices: USD per 1M tokens; any of
//	    cached_input_cost_per_1m: 1.25  # them replaces the built-in price
//	    output_cost_per_1m: 10          # of the model entirely
//	    price_as_of: "2024-10-01"
//	    price_max_prompt_tokens: 0      # a tiered price's prompt limit
type configFile struct {
	Encoders map[string]*encoderYAML `yaml:"encoders"`
	Models   map[string]*modelYAML   `yaml:"models"`
}

type encoderYAML struct {
	ModelFamily      string            `yaml:"model_family"`
	EncodingName     string            `yaml:"encoding_name"`
	SafetyMargin     *float64          `yaml:"safety_margin"`
	UseExactCounting bool              `yaml:"use_exact_counting"`
	ExactCountingAPI string            `yaml:"exact_counting_api"`
	EncoderParams    map[string]string `yaml:"encoder_params"`
}

type modelYAML struct {
	ContextLength     int64    `yaml:"context_length"`
	MaxOutputTokens   int64    `yaml:"max_output_tokens"`
	InputCostPer1M    *float64 `yaml:"input_cost_per_1m"`
	OutputCostPer1M   *float64 `yaml:"output_cost_per_1m"`
	Capabilities      []string `yaml:"capabilities"`
	SupportsStreaming *bool    `yaml:"supports_streaming"`
	SupportsJSONMode  bool     `yaml:"supports_json_mode"`
	// Appended for the built-in price table (docs/concepts/tokens.md#prices).
	CachedInputCostPer1M *float64 `yaml:"cached_input_cost_per_1m"`
	PriceAsOf            string   `yaml:"price_as_of"`
	PriceMaxPromptTokens int64    `yaml:"price_max_prompt_tokens"`
}

// Config is a parsed and validated token_encoders.yaml.
type Config struct {
	Encoders map[string]EncoderConfig
	Models   map[string]ModelMetadata
}

// LoadConfigFile reads and validates the token_encoders.yaml at path.
func LoadConfigFile(path string) (Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return Config{}, fmt.Errorf("token encoders config: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxConfigBytes+1))
	if err != nil {
		return Config{}, fmt.Errorf("token encoders config %s: %w", path, err)
	}
	cfg, err := ParseConfig(data)
	if err != nil {
		return Config{}, fmt.Errorf("token encoders config %s: %w", path, err)
	}
	return cfg, nil
}

// ParseConfig parses and validates a token_encoders.yaml document. Unknown
// keys are errors (a misspelt `safety_margn` must not silently fall back to a
// default), and every problem is reported with the entry it is in; all
// problems are reported at once, joined.
func ParseConfig(data []byte) (Config, error) {
	if len(data) > MaxConfigBytes {
		return Config{}, fmt.Errorf("larger than %d bytes", MaxConfigBytes)
	}
	var file configFile
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&file); err != nil && !errors.Is(err, io.EOF) {
		return Config{}, fmt.Errorf("parse: %w", err)
	}
	cfg := Config{Encoders: map[string]EncoderConfig{}, Models: map[string]ModelMetadata{}}
	var errs []error
	seen := map[string]string{} // lower-cased key -> key as written
	for _, key := range sortedKeys(file.Encoders) {
		where := fmt.Sprintf("encoders[%q]", key)
		if err := checkKey(key, seen); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", where, err))
			continue
		}
		ec, err := file.Encoders[key].validate()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", where, err))
			continue
		}
		cfg.Encoders[key] = ec
	}
	clear(seen)
	for _, key := range sortedKeys(file.Models) {
		where := fmt.Sprintf("models[%q]", key)
		if err := checkKey(key, seen); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", where, err))
			continue
		}
		md, err := file.Models[key].validate()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", where, err))
			continue
		}
		cfg.Models[key] = md
	}
	if err := errors.Join(errs...); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// checkKey accepts a model name or glob: 1-256 printable characters without
// spaces, unique ignoring case (lookups ignore case).
func checkKey(key string, seen map[string]string) error {
	if key == "" || len(key) > 256 || !utf8.ValidString(key) ||
		strings.IndexFunc(key, func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsPrint(r) }) >= 0 {
		return errors.New("key must be a model name or glob pattern of 1-256 printable characters without spaces")
	}
	lower := strings.ToLower(key)
	if other, dup := seen[lower]; dup {
		return fmt.Errorf("duplicate of %q (keys ignore case)", other)
	}
	seen[lower] = key
	return nil
}

func (y *encoderYAML) validate() (EncoderConfig, error) {
	if y == nil {
		return EncoderConfig{}, errors.New("empty entry: model_family and encoding_name are required")
	}
	var errs []error
	family, ok := familyNames[strings.ToLower(y.ModelFamily)]
	if !ok {
		errs = append(errs, fmt.Errorf("model_family %q is not one of claude, gpt, gemini, glm, qwen, llama, mistral, deepseek, custom", y.ModelFamily))
	}
	if !encoding.Known(y.EncodingName) {
		errs = append(errs, fmt.Errorf("encoding_name %q is not one of %s", y.EncodingName, strings.Join(encoding.Names(), ", ")))
	}
	margin := 1.0 // the default
	if y.SafetyMargin != nil {
		margin = *y.SafetyMargin
	}
	if math.IsNaN(margin) || margin < 1.0 || margin > maxMargin {
		errs = append(errs, fmt.Errorf("safety_margin %v must be between 1.0 and %v", margin, maxMargin))
	}
	if y.ExactCountingAPI != "" {
		if u, err := url.Parse(y.ExactCountingAPI); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("exact_counting_api %q must be an http or https URL", y.ExactCountingAPI))
		}
	} else if y.UseExactCounting {
		errs = append(errs, errors.New("use_exact_counting needs exact_counting_api"))
	}
	if err := errors.Join(errs...); err != nil {
		return EncoderConfig{}, err
	}
	return EncoderConfig{
		Family:           family,
		Encoding:         y.EncodingName,
		SafetyMargin:     margin,
		UseExactCounting: y.UseExactCounting,
		ExactCountingAPI: y.ExactCountingAPI,
		EncoderParams:    y.EncoderParams,
	}, nil
}

func (y *modelYAML) validate() (ModelMetadata, error) {
	md := defaultMetadata()
	if y == nil {
		return md, nil // a name alone takes the defaults
	}
	var errs []error
	if y.ContextLength < 0 || y.MaxOutputTokens < 0 {
		errs = append(errs, errors.New("context_length and max_output_tokens must be positive"))
	}
	if y.ContextLength > 0 {
		md.ContextLength = y.ContextLength
	}
	if y.MaxOutputTokens > 0 {
		md.MaxOutputTokens = y.MaxOutputTokens
	}
	if md.MaxOutputTokens > md.ContextLength {
		errs = append(errs, fmt.Errorf("max_output_tokens %d exceeds context_length %d", md.MaxOutputTokens, md.ContextLength))
	}
	for _, c := range []struct {
		name string
		cost *float64
	}{{"input_cost_per_1m", y.InputCostPer1M}, {"cached_input_cost_per_1m", y.CachedInputCostPer1M}, {"output_cost_per_1m", y.OutputCostPer1M}} {
		if c.cost != nil && (math.IsNaN(*c.cost) || math.IsInf(*c.cost, 0) || *c.cost < 0) {
			errs = append(errs, fmt.Errorf("%s %v must be a non-negative number", c.name, *c.cost))
		}
	}
	if y.PriceAsOf != "" {
		if err := pricetable.CheckDate(y.PriceAsOf); err != nil {
			errs = append(errs, fmt.Errorf("price_as_of: %w", err))
		}
	}
	if y.PriceMaxPromptTokens < 0 {
		errs = append(errs, fmt.Errorf("price_max_prompt_tokens %d must not be negative", y.PriceMaxPromptTokens))
	}
	for _, c := range y.Capabilities {
		if c == "" || len(c) > 64 || strings.IndexFunc(c, func(r rune) bool { return !unicode.IsPrint(r) || unicode.IsSpace(r) }) >= 0 {
			errs = append(errs, fmt.Errorf("capability %q must be 1-64 printable characters without spaces", c))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return ModelMetadata{}, err
	}
	md.InputCostPer1M, md.OutputCostPer1M = y.InputCostPer1M, y.OutputCostPer1M
	md.CachedInputCostPer1M, md.PriceAsOf, md.PriceMaxPromptTokens = y.CachedInputCostPer1M, y.PriceAsOf, y.PriceMaxPromptTokens
	md.Capabilities = y.Capabilities
	if y.SupportsStreaming != nil {
		md.SupportsStreaming = *y.SupportsStreaming
	}
	md.SupportsJSONMode = y.SupportsJSONMode
	return md, nil
}

// merge overlays c on the built-in defaults: an entry of the file replaces the
// default entry with the same key (ignoring case) and adds the others.
func (c Config) merge(encoders map[string]EncoderConfig, models map[string]ModelMetadata) (map[string]EncoderConfig, map[string]ModelMetadata) {
	return overlay(encoders, c.Encoders), overlay(models, c.Models)
}

func overlay[V any](base, over map[string]V) map[string]V {
	out := make(map[string]V, len(base)+len(over))
	for k, v := range base {
		out[strings.ToLower(k)] = v
	}
	for k, v := range over {
		out[strings.ToLower(k)] = v
	}
	return out
}
