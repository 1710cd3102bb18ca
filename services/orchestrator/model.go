package orchestrator

import (
	"context"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// Model is the narrow view of a chat-completions model the loop needs: one
// streamed completion with tools. Implementations retry transient failures
// themselves and honour ctx mid-stream; an error they return ends the run.
type Model interface {
	// Stream sends req and calls onDelta with each text or reasoning
	// fragment as it arrives (on the calling goroutine), then returns the
	// assembled assistant message and the usage the endpoint reported.
	Stream(ctx context.Context, req ModelRequest, onDelta func(ModelDelta)) (*ModelResponse, error)
}

// ModelRequest is one chat completion.
type ModelRequest struct {
	// Model to call.
	Model string
	// Messages, system messages first, as built by the context service.
	Messages []*baagentv1.ChatMessage
	// Tools the model may call; empty means none.
	Tools []*baagentv1.ToolSchema
}

// ModelDelta is one streamed fragment; exactly one field is set.
type ModelDelta struct {
	// Text is a fragment of the assistant's content.
	Text string
	// Thought is a fragment of reasoning the provider streams separately.
	Thought string
}

// ModelResponse is an assembled completion.
type ModelResponse struct {
	// Message is the assistant message: content, reasoning_content and the
	// tool calls with the model's ids and verbatim arguments.
	Message *baagentv1.ChatMessage
	// Usage is the token usage the endpoint reported (nil when it did not).
	Usage *baagentv1.Usage
	// FinishReason is the endpoint's finish reason (`stop`, `tool_calls`,
	// `length`), when reported.
	FinishReason string
}

// ModelFunc adapts a function to [Model].
type ModelFunc func(ctx context.Context, req ModelRequest, onDelta func(ModelDelta)) (*ModelResponse, error)

// Stream calls f.
func (f ModelFunc) Stream(ctx context.Context, req ModelRequest, onDelta func(ModelDelta)) (*ModelResponse, error) {
	return f(ctx, req, onDelta)
}
