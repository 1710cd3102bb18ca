package tokens

import (
	"cmp"
	"slices"
	"strings"
	"unicode/utf8"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/services/tokens/pricetable"
)

// EncoderConfig is how one model or pattern is counted: the
// EncoderConfig and one entry of token_encoders.yaml.
type EncoderConfig struct {
	Family   baagentv1.ModelFamily
	Encoding string // one of encoding.Names()
	// SafetyMargin multiplies the raw count; at least 1.0.
	SafetyMargin float64
	// UseExactCounting asks for counts from the provider API at
	// ExactCountingAPI, falling back to the local estimate when it fails.
	UseExactCounting bool
	ExactCountingAPI string
	// EncoderParams are free parameters; the provider counter reads
	// api_key_env and anthropic_version from them.
	EncoderParams map[string]string
}

// IsEstimate reports whether a local count under c is an estimate: exact only
// for an OpenAI model counted with its own encoding and no margin.
func (c EncoderConfig) IsEstimate() bool {
	return c.Family != baagentv1.ModelFamily_MODEL_FAMILY_GPT || c.SafetyMargin != 1.0
}

// ModelMetadata is a model's capabilities and prices (docs/concepts/tokens.md#model-metadata).
type ModelMetadata struct {
	ContextLength   int64
	MaxOutputTokens int64
	// InputCostPer1M and OutputCostPer1M are USD per million tokens, nil when
	// unknown: no price is ever made up.
	InputCostPer1M  *float64
	OutputCostPer1M *float64
	// CachedInputCostPer1M is the price of a prompt token served from the
	// provider's prompt cache, nil when unknown (billed as input).
	CachedInputCostPer1M *float64
	// PriceAsOf is the date of the prices (YYYY-MM-DD), empty when unknown.
	PriceAsOf string
	// PriceMaxPromptTokens is the largest prompt the prices hold for; 0
	// for no limit.
	PriceMaxPromptTokens int64
	Capabilities         []string
	SupportsStreaming    bool
	SupportsJSONMode     bool
}

// hasPrice reports whether m sets any price field: such an entry prices
// its models by itself, and the built-in price table is not consulted.
func (m ModelMetadata) hasPrice() bool {
	return m.InputCostPer1M != nil || m.OutputCostPer1M != nil || m.CachedInputCostPer1M != nil
}

// withPrice is m priced by p.
func (m ModelMetadata) withPrice(p pricetable.Price) ModelMetadata {
	in, out := p.Input, p.Output
	m.InputCostPer1M, m.OutputCostPer1M = &in, &out
	m.CachedInputCostPer1M = nil
	if p.CachedInput != nil {
		c := *p.CachedInput
		m.CachedInputCostPer1M = &c
	}
	m.PriceAsOf, m.PriceMaxPromptTokens = p.AsOf, p.MaxPromptTokens
	return m
}

// ModelMetadata defaults, used for a model with no metadata entry.
const (
	defaultContextLength   = 128_000
	defaultMaxOutputTokens = 4096
)

func defaultMetadata() ModelMetadata {
	return ModelMetadata{ContextLength: defaultContextLength, MaxOutputTokens: defaultMaxOutputTokens, SupportsStreaming: true}
}

// fallbackKey names the conservative fallback in logs; it matches nothing.
const fallbackKey = ""

// fallbackConfig is the last resort for a model nothing matches:
// cl100k_base with a conservative 20% margin.
var fallbackConfig = EncoderConfig{
	Family:       baagentv1.ModelFamily_MODEL_FAMILY_CUSTOM,
	Encoding:     "cl100k_base",
	SafetyMargin: 1.2,
}

// entry is a registry key (an exact name or a glob) with its value.
type entry[T any] struct {
	key   string // lower-cased
	value T
}

// table maps exact names and glob patterns to values. Lookups are
// case-insensitive.
type table[T any] struct {
	exact    map[string]T
	patterns []entry[T] // most specific first
}

func newTable[T any](m map[string]T) table[T] {
	t := table[T]{exact: make(map[string]T)}
	for k, v := range m {
		k = strings.ToLower(k)
		if isGlob(k) {
			t.patterns = append(t.patterns, entry[T]{k, v})
		} else {
			t.exact[k] = v
		}
	}
	// Patterns are not tried in file order, which a YAML map does not
	// keep; the most specific pattern wins instead, so gpt-4o-mini takes
	// "gpt-4o*" (o200k_base) over "gpt-4*" (cl100k_base) over "gpt-*".
	slices.SortFunc(t.patterns, func(a, b entry[T]) int {
		return cmp.Or(cmp.Compare(literalLen(b.key), literalLen(a.key)), cmp.Compare(a.key, b.key))
	})
	return t
}

// lookup finds lower in the table: exact name first, then patterns. It
// returns the matching key.
func (t table[T]) lookup(lower string) (value T, key string, match baagentv1.ModelMatch) {
	if v, ok := t.exact[lower]; ok {
		return v, lower, baagentv1.ModelMatch_MODEL_MATCH_EXACT
	}
	for _, e := range t.patterns {
		if globMatch(e.key, lower) {
			return e.value, e.key, baagentv1.ModelMatch_MODEL_MATCH_PATTERN
		}
	}
	return value, "", baagentv1.ModelMatch_MODEL_MATCH_UNSPECIFIED
}

func (t table[T]) keys() []string {
	keys := make([]string, 0, len(t.exact)+len(t.patterns))
	for k := range t.exact {
		keys = append(keys, k)
	}
	for _, e := range t.patterns {
		keys = append(keys, e.key)
	}
	slices.Sort(keys)
	return keys
}

func (t table[T]) get(key string) (T, bool) {
	if v, ok := t.exact[key]; ok {
		return v, true
	}
	for _, e := range t.patterns {
		if e.key == key {
			return e.value, true
		}
	}
	var zero T
	return zero, false
}

// Registry resolves a model name to how it is counted and its metadata. It is
// immutable once built and safe for concurrent use.
type Registry struct {
	encoders table[EncoderConfig]
	metadata table[ModelMetadata]
	prices   pricetable.Table
}

// NewRegistry builds a registry from encoder entries and metadata entries,
// keyed by exact model name or glob pattern (`*` any run, `?` one
// character). Entries are expected to be valid (see [LoadConfig]).
func NewRegistry(encoders map[string]EncoderConfig, metadata map[string]ModelMetadata) *Registry {
	return &Registry{encoders: newTable(encoders), metadata: newTable(metadata)}
}

// WithPrices returns a copy of r that prices a model whose metadata entry
// sets no price from prices (docs/concepts/tokens.md#prices): a price in
// the metadata (the operator's token_encoders.yaml) always wins.
func (r *Registry) WithPrices(prices pricetable.Table) *Registry {
	c := *r
	c.prices = prices
	return &c
}

// Resolution is how one model name is counted.
type Resolution struct {
	Model   string
	Match   baagentv1.ModelMatch
	Key     string // the registry key that matched, empty for the fallback
	Config  EncoderConfig
	Meta    ModelMetadata
	HasMeta bool // false when Meta holds the defaults
	// PriceKey is the name the model's price is listed under: the price
	// table's model (gpt-4o for gpt-4o-2024-08-06) or the metadata key
	// that set it. Empty when the model has no price.
	PriceKey string
}

// Resolve finds how model is counted (docs/concepts/tokens.md):
// an exact name, else a pattern, else the entry of the family detected from
// the name ("<family>-*"), else the conservative fallback. A router or
// server prefix ("openai/gpt-4o", "meta-llama/Llama-3.1-8B") is tried
// without the prefix too, before family detection.
func (r *Registry) Resolve(model string) Resolution {
	res := Resolution{Model: model}
	lower := strings.ToLower(model)
	names := []string{lower}
	if i := strings.LastIndexByte(lower, '/'); i >= 0 && i+1 < len(lower) {
		names = append(names, lower[i+1:])
	}
	found := false
	for _, name := range names {
		if cfg, key, match := r.encoders.lookup(name); match != baagentv1.ModelMatch_MODEL_MATCH_UNSPECIFIED {
			res.Config, res.Key, res.Match, found = cfg, key, match, true
			break
		}
	}
	if !found {
		family := detectFamily(lower)
		key := familyName(family) + "-*"
		if cfg, ok := r.encoders.get(key); ok && family != baagentv1.ModelFamily_MODEL_FAMILY_CUSTOM {
			res.Config, res.Key, res.Match = cfg, key, baagentv1.ModelMatch_MODEL_MATCH_FAMILY
		} else {
			res.Config, res.Key, res.Match = fallbackConfig, fallbackKey, baagentv1.ModelMatch_MODEL_MATCH_FALLBACK
		}
	}
	res.Meta, res.HasMeta = defaultMetadata(), false
	metaKey := ""
	for _, name := range names {
		if meta, key, match := r.metadata.lookup(name); match != baagentv1.ModelMatch_MODEL_MATCH_UNSPECIFIED {
			res.Meta, res.HasMeta, metaKey = meta, true, key
			break
		}
	}
	r.price(&res, names, metaKey)
	return res
}

// price sets res's price: the metadata entry's own when it has one, else
// the price table's row for one of names (the name as given, then without
// its router prefix; each exact, then as a snapshot of its base name).
func (r *Registry) price(res *Resolution, names []string, metaKey string) {
	if res.Meta.hasPrice() {
		res.PriceKey = metaKey
		return
	}
	for _, name := range names {
		if p, ok := r.prices.Lookup(name); ok {
			res.Meta, res.PriceKey = res.Meta.withPrice(p), p.Model
			return
		}
	}
}

// Keys lists every encoder entry key, sorted.
func (r *Registry) Keys() []string { return r.encoders.keys() }

// isGlob reports whether a key is a pattern.
func isGlob(key string) bool { return strings.ContainsAny(key, "*?") }

// literalLen is how much of a pattern is literal: its specificity.
func literalLen(pattern string) int {
	return len(pattern) - strings.Count(pattern, "*") - strings.Count(pattern, "?")
}

// globMatch reports whether name matches pattern, where `*` matches any run
// of characters (slashes included, as in fnmatch) and `?` one character.
// Only the last `*` is ever backtracked to (the classic two-pointer
// algorithm), so a lookup costs at most len(pattern)·len(name), never the
// exponential time of naive recursion.
func globMatch(pattern, name string) bool {
	p, n := 0, 0
	star, mark := -1, 0
	for n < len(name) {
		switch {
		case p < len(pattern) && pattern[p] == '?':
			_, size := decodeRune(name[n:])
			p, n = p+1, n+size
		case p < len(pattern) && pattern[p] == '*':
			star, mark = p, n
			p++
		case p < len(pattern) && pattern[p] == name[n]:
			p, n = p+1, n+1
		case star >= 0:
			_, size := decodeRune(name[mark:])
			mark += size
			p, n = star+1, mark
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}

func decodeRune(s string) (rune, int) {
	r, size := utf8.DecodeRuneInString(s)
	return r, max(size, 1)
}

// Entries describes every registry key, sorted: each encoder entry as a
// resolution of the key itself (Model and Key are the key, Match says whether
// it is an exact name or a pattern, Meta is the metadata entry with the same
// key when there is one, priced as the model of that name would be), then each
// metadata entry and each model of the price table that has no encoder entry
// of its own (preset models such as qwen-plus), resolved as a model name is.
func (r *Registry) Entries() []Resolution {
	keys := r.encoders.keys()
	out := make([]Resolution, 0, len(keys))
	for _, key := range keys {
		cfg, _ := r.encoders.get(key)
		res := Resolution{Model: key, Key: key, Config: cfg, Match: baagentv1.ModelMatch_MODEL_MATCH_EXACT, Meta: defaultMetadata()}
		if isGlob(key) {
			res.Match = baagentv1.ModelMatch_MODEL_MATCH_PATTERN
		}
		if meta, ok := r.metadata.get(key); ok {
			res.Meta, res.HasMeta = meta, true
		}
		if !isGlob(key) {
			r.price(&res, []string{key}, key)
		} else if res.Meta.hasPrice() {
			res.PriceKey = key
		}
		out = append(out, res)
	}
	for _, key := range r.metadata.keys() {
		if _, ok := r.encoders.get(key); !ok {
			out = append(out, r.Resolve(key))
		}
	}
	for _, model := range r.prices.Models() {
		if _, ok := r.encoders.get(model); ok {
			continue
		}
		if _, ok := r.metadata.get(model); ok {
			continue
		}
		out = append(out, r.Resolve(model))
	}
	slices.SortFunc(out, func(a, b Resolution) int { return cmp.Compare(a.Model, b.Model) })
	return out
}

// KnownModels returns the exact model names of the registry that a tokens
// server with encodersFile would serve (patterns such as `gpt-4*` left out),
// so that a process without a tokens server can still tell known models from
// invented ones, e.g. to bound a metric label.
func KnownModels(encodersFile string) ([]string, error) {
	encoders, models := defaultEncoders(), defaultModelMetadata()
	if encodersFile != "" {
		cfg, err := LoadConfigFile(encodersFile)
		if err != nil {
			return nil, err
		}
		encoders, models = cfg.merge(encoders, models)
	}
	prices, err := pricetable.Builtin()
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range NewRegistry(encoders, models).WithPrices(pricetable.NewTable(prices)).Entries() {
		if !isGlob(e.Model) {
			names = append(names, e.Model)
		}
	}
	return names, nil
}
