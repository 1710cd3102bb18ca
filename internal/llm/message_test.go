package llm

import (
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

func TestProtoRoundTrip(t *testing.T) {
	t.Parallel()

	in := []*baagentv1.ChatMessage{
		{Role: baagentv1.Role_ROLE_SYSTEM, Content: "sys"},
		{Role: baagentv1.Role_ROLE_USER, Content: "q", Name: "ana"},
		{Role: baagentv1.Role_ROLE_ASSISTANT, ReasoningContent: "think", ToolCalls: []*baagentv1.ToolCall{{Id: "call_1", Name: "sql_query", Arguments: `{"query":`}}},
		{Role: baagentv1.Role_ROLE_TOOL, Content: "Operation failed.", ToolCallId: "call_1"},
	}
	msgs, err := MessagesFromProto(in)
	if err != nil {
		t.Fatal(err)
	}
	if msgs[2].ToolCalls[0].Arguments != `{"query":` || msgs[3].Role != RoleTool || msgs[3].ToolCallID != "call_1" {
		t.Errorf("converted %+v", msgs)
	}
	for i, m := range msgs {
		if back := m.Proto(); !proto.Equal(back, in[i]) {
			t.Errorf("message %d round trip: %v != %v", i, back, in[i])
		}
	}
	_, err = MessagesFromProto([]*baagentv1.ChatMessage{in[0], {Content: "no role"}})
	if !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), "messages[1]") {
		t.Errorf("unspecified role: %v", err)
	}
}

func TestToolsFromProto(t *testing.T) {
	t.Parallel()

	params, err := structpb.NewStruct(map[string]any{"type": "object", "properties": map[string]any{"path": map[string]any{"type": "string"}}})
	if err != nil {
		t.Fatal(err)
	}
	tools, err := ToolsFromProto([]*baagentv1.ToolSchema{{Name: "file_read", Description: "Read", Parameters: params}, {Name: "noop"}})
	if err != nil {
		t.Fatal(err)
	}
	if tools[0].Name != "file_read" || !strings.Contains(string(tools[0].Parameters), `"path"`) || tools[1].Parameters != nil {
		t.Errorf("tools %+v", tools)
	}
	u := Usage{PromptTokens: 3, CompletionTokens: 4, TotalTokens: 7, CachedPromptTokens: 1}
	if p := u.Proto(); p.GetTotalTokens() != 7 || p.GetCachedPromptTokens() != 1 {
		t.Errorf("usage proto %v", p)
	}
}
