package llm

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
)

// Defaults of Config.
const (
	DefaultFirstByteTimeout = 120 * time.Second
	DefaultIdleTimeout      = 60 * time.Second
	DefaultMaxAttempts      = 4
	DefaultInitialBackoff   = 500 * time.Millisecond
	DefaultMaxBackoff       = 20 * time.Second
	DefaultMaxRetryAfter    = 60 * time.Second
)

// Bounds that protect the process from a misbehaving endpoint.
const (
	// MaxToolCalls bounds the tool calls in one assistant message.
	MaxToolCalls = 128
	// MaxMessageBytes bounds content + reasoning + arguments of one message.
	MaxMessageBytes = 8 << 20
)

// Config configures a Client.
type Config struct {
	// BaseURL is the API root including the version path, e.g.
	// "https://api.openai.com/v1" or "http://127.0.0.1:8080/v1". Required.
	BaseURL string
	// APIKey is sent as a bearer token; empty sends none (local servers).
	APIKey string
	// Model is the default model; a Request may name another.
	Model string
	// Defaults are the sampling options of every model; Models overrides
	// them per model name (exact match), field by field.
	Defaults Options
	Models   map[string]Options

	// FirstByteTimeout bounds the wait for the response headers and the
	// first chunk of each attempt; IdleTimeout bounds the silence between
	// two chunks. A stall fails the attempt with KindTimeout. Zero selects
	// the defaults; the caller's context bounds the whole call.
	FirstByteTimeout time.Duration
	IdleTimeout      time.Duration
	// Retry is the retry policy; zero fields select the defaults.
	Retry RetryPolicy

	// HTTPClient sends the requests; nil uses a client with sensible
	// transport timeouts. Its own Timeout must be zero (it would cut long
	// streams); the timeouts above apply instead.
	HTTPClient *http.Client
	// Logger receives retries and anomalies; nil discards them.
	Logger *slog.Logger
	// Registerer receives the metrics listed in the package doc; nil = none.
	Registerer prometheus.Registerer
	// TracerProvider traces each call (a GenAI "chat" span) and its HTTP
	// requests (children, with the trace context propagated to the
	// endpoint); nil or a no-op provider: nothing is traced.
	TracerProvider trace.TracerProvider
	// MetricModels are model names, besides Model and the keys of Models,
	// that the metrics report by name (the exact names of the model
	// registry, say). Any other model a request names — a client may pick
	// one — is reported as "other", so that made-up names cannot grow the
	// metrics without bound.
	MetricModels []string
}

// Options are per-model request options. Nil pointers and zero values are
// not sent, leaving the endpoint's default.
type Options struct {
	Temperature *float32
	TopP        *float32
	// MaxTokens is sent as max_tokens (what most compatible servers read);
	// MaxCompletionTokens as max_completion_tokens (OpenAI reasoning models
	// accept only this one).
	MaxTokens           int
	MaxCompletionTokens int
	Seed                *int
	Stop                []string
	// ReasoningEffort ("low", "medium", "high") for models that reason.
	ReasoningEffort string
	// ParallelToolCalls, when set, is sent as parallel_tool_calls.
	ParallelToolCalls *bool
	// IncludeUsage asks for the usage chunk at the end of a stream
	// (stream_options.include_usage). Nil means true; set false for the
	// rare server that rejects stream_options.
	IncludeUsage *bool
}

// merge returns o with the fields set in over replacing its own.
func (o Options) merge(over Options) Options {
	if over.Temperature != nil {
		o.Temperature = over.Temperature
	}
	if over.TopP != nil {
		o.TopP = over.TopP
	}
	if over.MaxTokens != 0 {
		o.MaxTokens = over.MaxTokens
	}
	if over.MaxCompletionTokens != 0 {
		o.MaxCompletionTokens = over.MaxCompletionTokens
	}
	if over.Seed != nil {
		o.Seed = over.Seed
	}
	if over.Stop != nil {
		o.Stop = over.Stop
	}
	if over.ReasoningEffort != "" {
		o.ReasoningEffort = over.ReasoningEffort
	}
	if over.ParallelToolCalls != nil {
		o.ParallelToolCalls = over.ParallelToolCalls
	}
	if over.IncludeUsage != nil {
		o.IncludeUsage = over.IncludeUsage
	}
	return o
}

func (o Options) validate(field string) error {
	var errs []error
	if t := o.Temperature; t != nil && (math.IsNaN(float64(*t)) || *t < 0 || *t > 2) {
		errs = append(errs, fmt.Errorf("%s.temperature: %v is outside 0..2", field, *t))
	}
	if p := o.TopP; p != nil && (math.IsNaN(float64(*p)) || *p < 0 || *p > 1) {
		errs = append(errs, fmt.Errorf("%s.top_p: %v is outside 0..1", field, *p))
	}
	if o.MaxTokens < 0 {
		errs = append(errs, fmt.Errorf("%s.max_tokens: %d is negative", field, o.MaxTokens))
	}
	if o.MaxCompletionTokens < 0 {
		errs = append(errs, fmt.Errorf("%s.max_completion_tokens: %d is negative", field, o.MaxCompletionTokens))
	}
	if len(o.Stop) > 4 {
		errs = append(errs, fmt.Errorf("%s.stop: at most 4 sequences, got %d", field, len(o.Stop)))
	}
	return errors.Join(errs...)
}

// RetryPolicy is how failed attempts are retried. Only failures before any
// delta was delivered are retried, and only Retryable kinds.
type RetryPolicy struct {
	// MaxAttempts counts the first attempt; 1 disables retries.
	MaxAttempts int
	// InitialBackoff is the base wait before the first retry; it doubles per
	// retry up to MaxBackoff, and each wait is drawn uniformly from
	// [base/2, base] (jitter, so that clients do not retry in lockstep).
	InitialBackoff time.Duration
	MaxBackoff     time.Duration
	// MaxRetryAfter caps how long a Retry-After may make us wait; a longer
	// one fails the call at once with the RetryAfter in the error.
	MaxRetryAfter time.Duration
}

func (r RetryPolicy) withDefaults() RetryPolicy {
	if r.MaxAttempts == 0 {
		r.MaxAttempts = DefaultMaxAttempts
	}
	if r.InitialBackoff == 0 {
		r.InitialBackoff = DefaultInitialBackoff
	}
	if r.MaxBackoff == 0 {
		r.MaxBackoff = DefaultMaxBackoff
	}
	if r.MaxRetryAfter == 0 {
		r.MaxRetryAfter = DefaultMaxRetryAfter
	}
	return r
}

// validate checks the configuration; every error names the field.
func (c *Config) validate() error {
	var errs []error
	if c.BaseURL == "" {
		errs = append(errs, errors.New("llm: base_url: required"))
	} else if u, err := url.Parse(c.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, fmt.Errorf("llm: base_url: %q is not an http(s) URL", c.BaseURL))
	}
	if strings.TrimSpace(c.Model) == "" {
		errs = append(errs, errors.New("llm: model: required"))
	}
	if c.FirstByteTimeout < 0 {
		errs = append(errs, errors.New("llm: first_byte_timeout: negative"))
	}
	if c.IdleTimeout < 0 {
		errs = append(errs, errors.New("llm: idle_timeout: negative"))
	}
	r := c.Retry
	if r.MaxAttempts < 0 || r.MaxAttempts > 20 {
		errs = append(errs, fmt.Errorf("llm: retry.max_attempts: %d is outside 0..20", r.MaxAttempts))
	}
	if r.InitialBackoff < 0 || r.MaxBackoff < 0 || r.MaxRetryAfter < 0 {
		errs = append(errs, errors.New("llm: retry: durations must not be negative"))
	}
	if c.HTTPClient != nil && c.HTTPClient.Timeout != 0 {
		errs = append(errs, errors.New("llm: http_client: Timeout must be zero (it would cut streams); use first_byte_timeout and idle_timeout"))
	}
	if err := c.Defaults.validate("llm: defaults"); err != nil {
		errs = append(errs, err)
	}
	for name, o := range c.Models {
		if err := o.validate(fmt.Sprintf("llm: models[%q]", name)); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
