package extract

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/baagent/baagent/services/memory/internal/structured"
)

// Schema names of the structured outputs (the scripted model answers
// them from its gazetteer, see examples/scenarios/README.md).
const (
	SchemaExtraction = "memory_extraction"
	SchemaReflexion  = "memory_reflexion"
)

// Defaults and limits.
const (
	DefaultTimeout         = 90 * time.Second
	DefaultMaxContentRunes = 24000
	DefaultMaxTokens       = 4096
)

// Config configures an OpenAI-compatible extractor.
type Config struct {
	// BaseURL is the API root ("https://api.openai.com/v1"). Required.
	BaseURL string
	// APIKey is sent as a Bearer token when set.
	APIKey string
	// Model is the chat model. Required.
	Model string
	// Reflexion adds a second pass asking which entities the first missed.
	Reflexion bool
	// Timeout bounds one model call (DefaultTimeout).
	Timeout time.Duration
	// MaxContentRunes bounds the text sent; longer content is cut, and the
	// prompt says so (DefaultMaxContentRunes).
	MaxContentRunes int
	// MaxTokens bounds each answer (DefaultMaxTokens).
	MaxTokens int
	// HTTPClient sends the requests (http.DefaultClient's transport when nil).
	HTTPClient *http.Client
}

// OpenAI extracts with an OpenAI-compatible chat model and JSON-schema
// structured output. It is safe for concurrent use.
type OpenAI struct {
	cfg Config
	llm *structured.Client
}

var _ Extractor = (*OpenAI)(nil)

// NewOpenAI checks cfg and returns the extractor.
func NewOpenAI(cfg Config) (*OpenAI, error) {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.MaxContentRunes <= 0 {
		cfg.MaxContentRunes = DefaultMaxContentRunes
	}
	if cfg.MaxTokens <= 0 {
		cfg.MaxTokens = DefaultMaxTokens
	}
	llm, err := structured.New(structured.Config{BaseURL: cfg.BaseURL, APIKey: cfg.APIKey, Model: cfg.Model,
		Timeout: cfg.Timeout, MaxTokens: cfg.MaxTokens, HTTPClient: cfg.HTTPClient})
	if err != nil {
		return nil, fmt.Errorf("extract: Config.%w", err)
	}
	return &OpenAI{cfg: cfg, llm: llm}, nil
}

// Model is the configured model.
func (o *OpenAI) Model() string { return o.cfg.Model }

// Extract runs the extraction pass and, when configured, the reflexion
// pass. A reflexion answer that cannot be used is ignored (the first pass
// stands); a reflexion call that fails retryably fails the extraction, so
// that the caller retries the whole episode.
func (o *OpenAI) Extract(ctx context.Context, content string) (*Result, error) {
	content = strings.ToValidUTF8(content, "\uFFFD")
	if strings.TrimSpace(content) == "" {
		return &Result{}, nil
	}
	text, cut := truncateRunes(content, o.cfg.MaxContentRunes)
	user := "Text:\n" + text
	if cut {
		user += "\n\n(The text was cut here; extract from the part shown.)"
	}
	var usage Usage
	raw, err := o.call(ctx, SchemaExtraction, extractionPrompt, user, &usage)
	if err != nil {
		return nil, err
	}
	res, err := Parse(raw)
	if err != nil {
		return nil, &Error{Kind: Permanent, Msg: "the model's extraction is not usable", Err: err}
	}
	if o.cfg.Reflexion && len(res.Entities) < MaxEntities {
		var b strings.Builder
		b.WriteString(user)
		b.WriteString("\n\nAlready extracted:\n")
		for _, e := range res.Entities {
			fmt.Fprintf(&b, "- %s (%s)\n", e.Name, e.Type)
		}
		raw, err := o.call(ctx, SchemaReflexion, reflexionPrompt, b.String(), &usage)
		switch {
		case err != nil && IsRetryable(err):
			return nil, err
		case err == nil:
			if more, perr := parseRaw(raw); perr == nil {
				res = merge(res, more)
			}
		}
	}
	res.Usage = usage
	return res, nil
}

func (o *OpenAI) call(ctx context.Context, schema, system, user string, usage *Usage) (string, error) {
	a, err := o.llm.Call(ctx, structured.Schema{Name: schema, Description: schemaDescriptions[schema], JSON: json.RawMessage(extractionSchema)}, system, user)
	if err == nil || a.PromptTokens+a.CompletionTokens > 0 {
		usage.Calls++
		usage.PromptTokens += a.PromptTokens
		usage.CompletionTokens += a.CompletionTokens
	}
	if f := (*structured.Failure)(nil); errors.As(err, &f) {
		kind := Permanent
		if f.Retryable {
			kind = Retryable
		}
		return "", &Error{Kind: kind, Status: f.Status, Msg: f.Msg, Err: f.Err}
	}
	return a.Content, err
}

// Kind says whether an error may go away.
type Kind int

const (
	// Retryable: the model is unavailable (rate limited, overloaded,
	// unreachable, timed out, misconfigured credentials); try again later.
	Retryable Kind = iota + 1
	// Permanent: the request or the answer is unusable; trying the same
	// content again will not help.
	Permanent
)

func (k Kind) String() string {
	if k == Retryable {
		return "retryable"
	}
	return "permanent"
}

// Error is a failed extraction.
type Error struct {
	Kind Kind
	// Status is the HTTP status of the model's answer, 0 if none.
	Status int
	Msg    string
	Err    error
}

func (e *Error) Error() string {
	s := "extract: " + e.Kind.String() + ": " + e.Msg
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *Error) Unwrap() error { return e.Err }

// IsRetryable reports whether err is an extraction error worth retrying.
func IsRetryable(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Kind == Retryable
}

func truncateRunes(s string, n int) (string, bool) {
	if utf8.RuneCountInString(s) <= n {
		return s, false
	}
	i := 0
	for j := range s {
		if i == n {
			return s[:j], true
		}
		i++
	}
	return s, false
}
