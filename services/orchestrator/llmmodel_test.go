package orchestrator

import (
	"context"
	"errors"
	"testing"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/llm"
)

type fakeLLM struct {
	got  llm.Request
	resp *llm.Response
	err  error
}

func (f *fakeLLM) Chat(_ context.Context, req llm.Request, onDelta llm.DeltaFunc) (*llm.Response, error) {
	f.got = req
	for _, d := range []llm.Delta{{Reasoning: "hmm"}, {Text: "Let me "}, {ToolCall: &llm.ToolCallDelta{ID: "call_1", Name: "glob"}}, {Text: "look."}} {
		if err := onDelta(d); err != nil {
			return nil, err
		}
	}
	return f.resp, f.err
}

func TestLLMAdapter(t *testing.T) {
	f := &fakeLLM{resp: &llm.Response{
		Message:       llm.Message{Role: llm.RoleAssistant, Content: "Let me look.", ReasoningContent: "hmm", ToolCalls: []llm.ToolCall{{ID: "call_1", Name: "glob", Arguments: `{"pattern":"*.csv"}`}}},
		FinishReason:  llm.FinishToolCalls,
		Usage:         llm.Usage{PromptTokens: 10, CompletionTokens: 5, TotalTokens: 15},
		UsageReported: true,
	}}
	var deltas []ModelDelta
	resp, err := LLM(f).Stream(t.Context(), ModelRequest{
		Model:    "gpt-4o",
		Messages: []*baagentv1.ChatMessage{{Role: baagentv1.Role_ROLE_SYSTEM, Content: "sys"}, {Role: baagentv1.Role_ROLE_USER, Content: "hi"}},
		Tools:    []*baagentv1.ToolSchema{skillToolSchema()},
	}, func(d ModelDelta) { deltas = append(deltas, d) })
	if err != nil {
		t.Fatal(err)
	}
	if f.got.Model != "gpt-4o" || len(f.got.Messages) != 2 || f.got.Messages[1].Content != "hi" || len(f.got.Tools) != 1 || f.got.Tools[0].Name != SkillToolName || len(f.got.Tools[0].Parameters) == 0 {
		t.Errorf("request = %+v", f.got)
	}
	if len(deltas) != 3 || deltas[0].Thought != "hmm" || deltas[1].Text != "Let me " || deltas[2].Text != "look." {
		t.Errorf("deltas = %+v", deltas)
	}
	m := resp.Message
	if m.GetContent() != "Let me look." || m.GetReasoningContent() != "hmm" || len(m.GetToolCalls()) != 1 || m.GetToolCalls()[0].GetId() != "call_1" ||
		m.GetToolCalls()[0].GetArguments() != `{"pattern":"*.csv"}` || resp.Usage.GetTotalTokens() != 15 || resp.FinishReason != llm.FinishToolCalls {
		t.Errorf("response = %+v", resp)
	}

	f.resp.UsageReported = false
	if resp, _ := LLM(f).Stream(t.Context(), ModelRequest{}, func(ModelDelta) {}); resp.Usage != nil {
		t.Errorf("unreported usage became %v", resp.Usage)
	}
	f.err = errors.New("endpoint down")
	if _, err := LLM(f).Stream(t.Context(), ModelRequest{}, func(ModelDelta) {}); err == nil {
		t.Error("error lost")
	}
	if _, err := LLM(f).Stream(t.Context(), ModelRequest{Messages: []*baagentv1.ChatMessage{{}}}, func(ModelDelta) {}); err == nil {
		t.Error("a message without a role was sent")
	}
}
