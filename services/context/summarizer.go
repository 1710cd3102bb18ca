package contextsvc

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	openai "github.com/sashabaranov/go-openai"
)

// Summarizer answers one summary prompt with a model. [OpenAISummarizer]
// talks to any OpenAI-compatible endpoint.
type Summarizer interface {
	Summarize(ctx context.Context, req SummaryRequest) (string, error)
}

// SummaryRequest is one summarizer call.
type SummaryRequest struct {
	// Model to use.
	Model string
	// System and Prompt are the system and user messages.
	System, Prompt string
	// MaxTokens caps the summary.
	MaxTokens int
}

// OpenAISummarizerOptions configures an [OpenAISummarizer].
type OpenAISummarizerOptions struct {
	// BaseURL of the OpenAI-compatible API, e.g. https://api.openai.com/v1
	// or the scripted model's URL; required.
	BaseURL string
	// APIKey sent as a bearer token; may be empty for local servers.
	APIKey string
	// HTTPClient to use; nil uses a client without a global timeout (each
	// call is bounded by its context).
	HTTPClient *http.Client
}

// OpenAISummarizer summarizes through the chat completions API.
type OpenAISummarizer struct {
	client *openai.Client
	apiKey string // removed from errors: providers quote the key they got
}

// NewOpenAISummarizer returns a summarizer for an OpenAI-compatible endpoint.
func NewOpenAISummarizer(o OpenAISummarizerOptions) (*OpenAISummarizer, error) {
	if o.BaseURL == "" {
		return nil, errors.New("summarizer: BaseURL is required")
	}
	cfg := openai.DefaultConfig(o.APIKey)
	cfg.BaseURL = strings.TrimRight(o.BaseURL, "/")
	if o.HTTPClient != nil {
		cfg.HTTPClient = o.HTTPClient
	} else {
		cfg.HTTPClient = &http.Client{}
	}
	return &OpenAISummarizer{client: openai.NewClientWithConfig(cfg), apiKey: o.APIKey}, nil
}

// Summarize sends the prompt and returns the model's text.
func (s *OpenAISummarizer) Summarize(ctx context.Context, req SummaryRequest) (string, error) {
	resp, err := s.client.CreateChatCompletion(ctx, openai.ChatCompletionRequest{
		Model: req.Model,
		Messages: []openai.ChatCompletionMessage{
			{Role: openai.ChatMessageRoleSystem, Content: req.System},
			{Role: openai.ChatMessageRoleUser, Content: req.Prompt},
		},
		MaxTokens: req.MaxTokens, //nolint:staticcheck // many OpenAI-compatible servers know only max_tokens
	})
	if err != nil {
		return "", fmt.Errorf("summarizer model %q: %s", req.Model, redactKey(err.Error(), s.apiKey))
	}
	if len(resp.Choices) == 0 {
		return "", fmt.Errorf("summarizer model %q: no choices in the response", req.Model)
	}
	text := strings.TrimSpace(resp.Choices[0].Message.Content)
	if text == "" {
		return "", fmt.Errorf("summarizer model %q: empty summary (finish reason %q)", req.Model, resp.Choices[0].FinishReason)
	}
	return text, nil
}

var _ Summarizer = (*OpenAISummarizer)(nil)

// redactKey removes key from msg, so that an endpoint quoting the key in
// its error ("Incorrect API key provided: sk-…") does not put it in logs.
// Keys shorter than 8 bytes are left alone: they could be ordinary words.
func redactKey(msg, key string) string {
	if len(key) < 8 {
		return msg
	}
	return strings.ReplaceAll(msg, key, "[redacted]")
}

// summaryCallTimeout is the default bound of one summarizer call.
const summaryCallTimeout = 60 * time.Second
