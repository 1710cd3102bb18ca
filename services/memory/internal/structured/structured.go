// Package structured asks an OpenAI-compatible chat model for an answer
// in a JSON schema (strict structured output), the one kind of model call
// the memory service's extraction and community summaries make. It says
// which failures may go away (the model unavailable) and which will not
// (an unusable request or answer), and switches to max_completion_tokens
// for models that refuse max_tokens.
package structured

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

	openai "github.com/sashabaranov/go-openai"
)

// Config is a model endpoint.
type Config struct {
	BaseURL, APIKey, Model string
	// Timeout bounds one call; required.
	Timeout time.Duration
	// MaxTokens bounds the answer; required.
	MaxTokens int
	// HTTPClient sends the requests (a plain client when nil).
	HTTPClient *http.Client
}

// Client calls one model. It is safe for concurrent use.
type Client struct {
	cfg    Config
	client *openai.Client
	// completionTokens is set once the model refused max_tokens.
	completionTokens atomic.Bool
}

// ErrNoBaseURL and ErrNoModel name the Config field a caller left empty.
var (
	ErrNoBaseURL = errors.New("BaseURL is required")
	ErrNoModel   = errors.New("Model is required")
)

// New checks cfg (BaseURL trimmed of spaces and trailing slashes).
func New(cfg Config) (*Client, error) {
	cfg.BaseURL = strings.TrimRight(strings.TrimSpace(cfg.BaseURL), "/")
	switch {
	case cfg.BaseURL == "":
		return nil, ErrNoBaseURL
	case cfg.Model == "":
		return nil, ErrNoModel
	case cfg.Timeout <= 0 || cfg.MaxTokens <= 0:
		return nil, errors.New("the timeout and the token limit must be positive")
	}
	oc := openai.DefaultConfig(cfg.APIKey)
	oc.BaseURL = cfg.BaseURL
	if cfg.HTTPClient != nil {
		oc.HTTPClient = cfg.HTTPClient
	} else {
		oc.HTTPClient = &http.Client{}
	}
	return &Client{cfg: cfg, client: openai.NewClientWithConfig(oc)}, nil
}

// Model is the configured model.
func (c *Client) Model() string { return c.cfg.Model }

// Schema is the JSON schema the answer must follow.
type Schema struct {
	Name, Description string
	JSON              json.RawMessage
}

// Answer is the model's answer and what it cost.
type Answer struct {
	Content                        string
	PromptTokens, CompletionTokens int
}

// Failure is a failed call.
type Failure struct {
	// Retryable: the model is unavailable (rate limited, overloaded,
	// unreachable, timed out, or not reachable as configured); the same
	// request may succeed later.
	Retryable bool
	// Status is the HTTP status of the model's answer, 0 if none.
	Status int
	Msg    string
	Err    error
}

func (f *Failure) Error() string {
	if f.Err != nil {
		return f.Msg + ": " + f.Err.Error()
	}
	return f.Msg
}

func (f *Failure) Unwrap() error { return f.Err }

// Call sends the system and user messages and returns the answer. Every
// error is a *Failure; an answer the model gave but that cannot be used
// (a refusal, an answer cut at MaxTokens, a content filter) is a
// permanent one, returned with the tokens it cost.
func (c *Client) Call(ctx context.Context, schema Schema, system, user string) (Answer, error) {
	cctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	req := openai.ChatCompletionRequest{
		Model: c.cfg.Model,
		Messages: []openai.ChatCompletionMessage{
			{Role: openai.ChatMessageRoleSystem, Content: system},
			{Role: openai.ChatMessageRoleUser, Content: user},
		},
		MaxTokens: c.cfg.MaxTokens, //nolint:staticcheck // many OpenAI-compatible servers know only max_tokens
		ResponseFormat: &openai.ChatCompletionResponseFormat{
			Type: openai.ChatCompletionResponseFormatTypeJSONSchema,
			JSONSchema: &openai.ChatCompletionResponseFormatJSONSchema{
				Name: schema.Name, Description: schema.Description, Schema: schema.JSON, Strict: true,
			},
		},
	}
	if c.completionTokens.Load() {
		req.MaxCompletionTokens, req.MaxTokens = req.MaxTokens, 0 //nolint:staticcheck // see above
	}
	resp, err := c.client.CreateChatCompletion(cctx, req)
	if err != nil && wantsMaxCompletionTokens(err) && req.MaxTokens != 0 { //nolint:staticcheck // see above
		// Reasoning models refuse max_tokens: say max_completion_tokens
		// from now on.
		c.completionTokens.Store(true)
		req.MaxCompletionTokens, req.MaxTokens = req.MaxTokens, 0 //nolint:staticcheck // see above
		resp, err = c.client.CreateChatCompletion(cctx, req)
	}
	if err != nil {
		return Answer{}, Classify(ctx, err)
	}
	a := Answer{PromptTokens: resp.Usage.PromptTokens, CompletionTokens: resp.Usage.CompletionTokens}
	if len(resp.Choices) == 0 {
		return a, &Failure{Msg: "the model answered no choices"}
	}
	ch := resp.Choices[0]
	switch {
	case ch.Message.Refusal != "":
		return a, &Failure{Msg: "the model refused: " + cut(ch.Message.Refusal, 200)}
	case ch.FinishReason == openai.FinishReasonLength:
		return a, &Failure{Msg: fmt.Sprintf("the answer was cut at %d tokens", c.cfg.MaxTokens)}
	case ch.FinishReason == openai.FinishReasonContentFilter:
		return a, &Failure{Msg: "the answer was withheld by a content filter"}
	}
	a.Content = ch.Message.Content
	return a, nil
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

// Classify maps a client error to a Failure: cancellation, a 429, 5xx or
// 408, and an unreachable model are retryable, and so are 401, 403 and
// 404 (the model is not reachable as configured: the same request can
// succeed once that is fixed); other statuses and undecodable bodies are
// not.
func Classify(ctx context.Context, err error) *Failure {
	if ctx.Err() != nil {
		return &Failure{Retryable: true, Msg: "cancelled", Err: ctx.Err()}
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
		retryable := status == http.StatusTooManyRequests || status >= 500 || status == http.StatusRequestTimeout ||
			status == http.StatusUnauthorized || status == http.StatusForbidden || status == http.StatusNotFound
		return &Failure{Retryable: retryable, Status: status, Msg: "the model call failed", Err: err}
	}
	var netErr net.Error
	if errors.As(err, &netErr) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, net.ErrClosed) ||
		strings.Contains(err.Error(), "connection") || strings.Contains(err.Error(), "EOF") {
		return &Failure{Retryable: true, Msg: "the model is unreachable", Err: err}
	}
	// A body go-openai cannot decode is an unusable answer.
	return &Failure{Msg: "the model's response is unusable", Err: err}
}

// cut shortens s to n runes, marking the cut.
func cut(s string, n int) string {
	i := 0
	for j := range s {
		if i == n {
			return s[:j] + "…"
		}
		i++
	}
	return s
}
