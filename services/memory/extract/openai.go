package extract

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	openai "github.com/sashabaranov/go-openai"
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
	cfg    Config
	client *openai.Client
	// completionTokens is set once the model refused max_tokens.
	completionTokens atomic.Bool
}

var _ Extractor = (*OpenAI)(nil)

// NewOpenAI checks cfg and returns the extractor.
func NewOpenAI(cfg Config) (*OpenAI, error) {
	cfg.BaseURL = strings.TrimRight(strings.TrimSpace(cfg.BaseURL), "/")
	if cfg.BaseURL == "" {
		return nil, errors.New("extract: Config.BaseURL is required")
	}
	if cfg.Model == "" {
		return nil, errors.New("extract: Config.Model is required")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.MaxContentRunes <= 0 {
		cfg.MaxContentRunes = DefaultMaxContentRunes
	}
	if cfg.MaxTokens <= 0 {
		cfg.MaxTokens = DefaultMaxTokens
	}
	oc := openai.DefaultConfig(cfg.APIKey)
	oc.BaseURL = cfg.BaseURL
	if cfg.HTTPClient != nil {
		oc.HTTPClient = cfg.HTTPClient
	} else {
		oc.HTTPClient = &http.Client{}
	}
	return &OpenAI{cfg: cfg, client: openai.NewClientWithConfig(oc)}, nil
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
	cctx, cancel := context.WithTimeout(ctx, o.cfg.Timeout)
	defer cancel()
	req := openai.ChatCompletionRequest{
		Model: o.cfg.Model,
		Messages: []openai.ChatCompletionMessage{
			{Role: openai.ChatMessageRoleSystem, Content: system},
			{Role: openai.ChatMessageRoleUser, Content: user},
		},
		MaxTokens: o.cfg.MaxTokens, //nolint:staticcheck // many OpenAI-compatible servers know only max_tokens
		ResponseFormat: &openai.ChatCompletionResponseFormat{
			Type: openai.ChatCompletionResponseFormatTypeJSONSchema,
			JSONSchema: &openai.ChatCompletionResponseFormatJSONSchema{
				Name:        schema,
				Description: schemaDescriptions[schema],
				Schema:      json.RawMessage(extractionSchema),
				Strict:      true,
			},
		},
	}
	if o.completionTokens.Load() {
		req.MaxCompletionTokens, req.MaxTokens = req.MaxTokens, 0 //nolint:staticcheck // see above
	}
	resp, err := o.client.CreateChatCompletion(cctx, req)
	if err != nil && wantsMaxCompletionTokens(err) && req.MaxTokens != 0 { //nolint:staticcheck // see above
		// Reasoning models refuse max_tokens: say max_completion_tokens
		// from now on.
		o.completionTokens.Store(true)
		req.MaxCompletionTokens, req.MaxTokens = req.MaxTokens, 0 //nolint:staticcheck // see above
		resp, err = o.client.CreateChatCompletion(cctx, req)
	}
	if err != nil {
		return "", classify(ctx, err)
	}
	usage.Calls++
	usage.PromptTokens += resp.Usage.PromptTokens
	usage.CompletionTokens += resp.Usage.CompletionTokens
	if len(resp.Choices) == 0 {
		return "", &Error{Kind: Permanent, Msg: "the model answered no choices"}
	}
	ch := resp.Choices[0]
	switch {
	case ch.Message.Refusal != "":
		return "", &Error{Kind: Permanent, Msg: "the model refused: " + truncate(ch.Message.Refusal, 200)}
	case ch.FinishReason == openai.FinishReasonLength:
		return "", &Error{Kind: Permanent, Msg: fmt.Sprintf("the answer was cut at %d tokens", o.cfg.MaxTokens)}
	case ch.FinishReason == openai.FinishReasonContentFilter:
		return "", &Error{Kind: Permanent, Msg: "the answer was withheld by a content filter"}
	}
	return ch.Message.Content, nil
}

// wantsMaxCompletionTokens recognises the 400 of a model that takes
// max_completion_tokens instead of max_tokens (OpenAI's reasoning models).
func wantsMaxCompletionTokens(err error) bool {
	var apiErr *openai.APIError
	if !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != http.StatusBadRequest {
		return false
	}
	return (apiErr.Param != nil && *apiErr.Param == "max_tokens") || strings.Contains(apiErr.Message, "max_completion_tokens")
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

// classify maps a client error to an Error.
func classify(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return &Error{Kind: Retryable, Msg: "cancelled", Err: ctx.Err()}
	}
	status := 0
	var apiErr *openai.APIError
	var reqErr *openai.RequestError
	switch {
	case errors.As(err, &apiErr):
		status = apiErr.HTTPStatusCode
	case errors.As(err, &reqErr):
		status = reqErr.HTTPStatusCode
	}
	if status != 0 {
		kind := Permanent
		switch {
		case status == http.StatusTooManyRequests, status >= 500, status == http.StatusRequestTimeout,
			status == http.StatusUnauthorized, status == http.StatusForbidden, status == http.StatusNotFound:
			// 401/403/404 mean the model is not reachable as configured: the
			// episode is fine and can be processed once that is fixed.
			kind = Retryable
		}
		return &Error{Kind: kind, Status: status, Msg: "the model call failed", Err: err}
	}
	var netErr net.Error
	if errors.As(err, &netErr) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, net.ErrClosed) || strings.Contains(err.Error(), "connection") || strings.Contains(err.Error(), "EOF") {
		return &Error{Kind: Retryable, Msg: "the model is unreachable", Err: err}
	}
	// A body go-openai cannot decode is an unusable answer.
	return &Error{Kind: Permanent, Msg: "the model's response is unusable", Err: err}
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

func truncate(s string, n int) string {
	t, cut := truncateRunes(s, n)
	if cut {
		return t + "…"
	}
	return t
}
