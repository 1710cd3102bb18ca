package orchestrator

import (
	"context"
	"fmt"

	"github.com/baagent/baagent/internal/llm"
)

// LLM adapts an OpenAI-compatible client (internal/llm, pointed at a real
// endpoint or at the built-in scripted model) to [Model].
func LLM(m llm.Model) Model { return llmModel{m} }

type llmModel struct{ m llm.Model }

func (a llmModel) Stream(ctx context.Context, req ModelRequest, onDelta func(ModelDelta)) (*ModelResponse, error) {
	msgs, err := llm.MessagesFromProto(req.Messages)
	if err != nil {
		return nil, fmt.Errorf("model request: %w", err)
	}
	tools, err := llm.ToolsFromProto(req.Tools)
	if err != nil {
		return nil, fmt.Errorf("model request: %w", err)
	}
	resp, err := a.m.Chat(ctx, llm.Request{Model: req.Model, Messages: msgs, Tools: tools}, func(d llm.Delta) error {
		switch {
		case d.Text != "":
			onDelta(ModelDelta{Text: d.Text})
		case d.Reasoning != "":
			onDelta(ModelDelta{Thought: d.Reasoning})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := &ModelResponse{Message: resp.Message.Proto(), FinishReason: resp.FinishReason}
	if resp.UsageReported {
		out.Usage = resp.Usage.Proto()
	}
	return out, nil
}
