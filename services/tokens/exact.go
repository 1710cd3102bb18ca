package tokens

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
	"unicode/utf8"
)

// ExactCounter counts text through a provider's token-counting API, for the
// registry entries with use_exact_counting. The service falls back to its
// local estimate whenever it is unavailable or fails.
type ExactCounter interface {
	// Available reports, without a request, whether cfg can be counted:
	// an endpoint is configured and its credentials are present.
	Available(cfg EncoderConfig) bool
	// CountText returns the provider's count for text sent to model.
	CountText(ctx context.Context, cfg EncoderConfig, model, text string) (int64, error)
}

// Parameters of an encoders entry (encoder_params) read by [AnthropicCounter].
const (
	ParamAPIKeyEnv        = "api_key_env"       // environment variable holding the API key
	ParamAnthropicVersion = "anthropic_version" // anthropic-version header
)

// DefaultAnthropicVersion is the anthropic-version header sent when the entry
// does not set anthropic_version.
const DefaultAnthropicVersion = "2023-06-01"

// maxExactResponseBytes bounds a provider's answer; a count is a few bytes.
const maxExactResponseBytes = 64 << 10

// AnthropicCounter calls an endpoint with the shape of Anthropic's
// POST /v1/messages/count_tokens: a JSON body {"model", "messages"} with the
// text as one user message, headers x-api-key and anthropic-version, and a
// JSON answer {"input_tokens": N}. Because the text travels as a user
// message, the count includes that message's few framing tokens: it is the
// cost of sending the text as a prompt, never below the text's own count.
type AnthropicCounter struct {
	// Client makes the requests; nil uses a client with a 10 s timeout.
	Client *http.Client
	// Getenv reads the API key variable named by api_key_env; nil reads
	// nothing, so an entry needing a key is never available.
	Getenv func(string) string
}

var defaultExactClient = &http.Client{Timeout: 10 * time.Second}

// Available implements [ExactCounter]: an endpoint is set and, when the
// entry names an API key variable, that variable is set. So no request is
// ever made without the key, for instance from a sample configuration.
func (a AnthropicCounter) Available(cfg EncoderConfig) bool {
	if !cfg.UseExactCounting || cfg.ExactCountingAPI == "" {
		return false
	}
	if env := cfg.EncoderParams[ParamAPIKeyEnv]; env != "" {
		return a.Getenv != nil && a.Getenv(env) != ""
	}
	return true
}

// CountText implements [ExactCounter].
func (a AnthropicCounter) CountText(ctx context.Context, cfg EncoderConfig, model, text string) (int64, error) {
	body, err := json.Marshal(map[string]any{
		"model":    model,
		"messages": []map[string]string{{"role": "user", "content": text}},
	})
	if err != nil {
		return 0, fmt.Errorf("exact count: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, cfg.ExactCountingAPI, bytes.NewReader(body))
	if err != nil {
		return 0, fmt.Errorf("exact count: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	version := cfg.EncoderParams[ParamAnthropicVersion]
	if version == "" {
		version = DefaultAnthropicVersion
	}
	req.Header.Set("anthropic-version", version)
	if env := cfg.EncoderParams[ParamAPIKeyEnv]; env != "" && a.Getenv != nil {
		req.Header.Set("x-api-key", a.Getenv(env))
	}
	client := a.Client
	if client == nil {
		client = defaultExactClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("exact count: %w", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxExactResponseBytes))
	if err != nil {
		return 0, fmt.Errorf("exact count: read answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("exact count: %s answered %s: %s", cfg.ExactCountingAPI, resp.Status, snippet(data))
	}
	var out struct {
		InputTokens *int64 `json:"input_tokens"`
	}
	if err := json.Unmarshal(data, &out); err != nil {
		return 0, fmt.Errorf("exact count: decode answer: %w", err)
	}
	if out.InputTokens == nil || *out.InputTokens < 0 {
		return 0, errors.New("exact count: answer has no valid input_tokens")
	}
	return *out.InputTokens, nil
}

// snippet is the start of an error body, for a log line.
func snippet(b []byte) string {
	const max = 200
	if len(b) > max {
		b = b[:max]
		for len(b) > 0 && !utf8.Valid(b) {
			b = b[:len(b)-1]
		}
	}
	return string(bytes.ToValidUTF8(b, []byte("?")))
}
