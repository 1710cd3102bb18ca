package skills

import (
	"context"
	"errors"
	"fmt"
	"time"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// DefaultCountTimeout bounds one CountTokens call of a [TokensServiceCounter]:
// a catalog is better sized with the local estimate than late.
const DefaultCountTimeout = 2 * time.Second

// TokensServiceCounter is a [TokenCounter] that counts through the tokens
// service (exact BPE for the model's tokenizer, with the service's safety
// margin applied). When the service fails or is unreachable, the Server
// falls back to [EstimateTokens], logs the switch once and marks the
// response (see Server.GetCatalog).
type TokensServiceCounter struct {
	client  baagentv1.TokensServiceClient
	timeout time.Duration
}

var _ TokenCounter = (*TokensServiceCounter)(nil)

// NewTokensServiceCounter returns a counter using client; timeout bounds each
// call (DefaultCountTimeout when <= 0).
func NewTokensServiceCounter(client baagentv1.TokensServiceClient, timeout time.Duration) *TokensServiceCounter {
	if timeout <= 0 {
		timeout = DefaultCountTimeout
	}
	return &TokensServiceCounter{client: client, timeout: timeout}
}

// CountTokens returns the tokens text takes for model, as the tokens service
// counts them (CountTokensResponse.count, margin included).
func (c *TokensServiceCounter) CountTokens(ctx context.Context, text, model string) (int, error) {
	if c == nil || c.client == nil {
		return 0, errors.New("tokens service counter: no client")
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	resp, err := c.client.CountTokens(ctx, &baagentv1.CountTokensRequest{Model: model, Text: text})
	if err != nil {
		return 0, fmt.Errorf("tokens service: %w", err)
	}
	n := resp.GetCount()
	if n < 0 {
		return 0, fmt.Errorf("tokens service: negative count %d", n)
	}
	return int(min(n, int64(maxCount))), nil
}

// maxCount keeps a count within int on every platform.
const maxCount = 1<<31 - 1
