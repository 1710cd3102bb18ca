package llm

import (
	"encoding/json"
	"fmt"

	"google.golang.org/protobuf/encoding/protojson"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// Roles as the chat-completions API spells them.
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// Finish reasons the API reports (others are passed through verbatim).
const (
	FinishStop          = "stop"
	FinishToolCalls     = "tool_calls"
	FinishLength        = "length"
	FinishContentFilter = "content_filter"
)

// Message is one chat message in the OpenAI shape.
type Message struct {
	// Role is one of RoleSystem, RoleUser, RoleAssistant, RoleTool.
	Role string
	// Content is the text; for a tool message, the observation.
	Content string
	// Name is the optional participant name.
	Name string
	// ReasoningContent is the model's separately streamed reasoning (the
	// ReAct "Thought"), when the provider exposes it. It is returned by the
	// model but never sent back: providers reject it in input messages.
	ReasoningContent string
	// ToolCalls are the calls an assistant message requests, in order.
	ToolCalls []ToolCall
	// ToolCallID is, for a tool message, the id of the call it answers.
	ToolCallID string
}

// ToolCall is one function call requested by the model.
type ToolCall struct {
	// ID is the model's id (`call_abc123`); the tool message answering the
	// call must carry it as ToolCallID.
	ID string
	// Name is the tool name as the model wrote it.
	Name string
	// Arguments is the argument JSON exactly as the model produced it,
	// possibly invalid JSON.
	Arguments string
}

// Tool describes a function the model may call.
type Tool struct {
	Name        string
	Description string
	// Parameters is the JSON Schema of the arguments object; empty means an
	// object with no declared properties.
	Parameters json.RawMessage
}

// Usage is the token usage the endpoint reported for one call.
type Usage struct {
	PromptTokens       int64
	CompletionTokens   int64
	TotalTokens        int64
	CachedPromptTokens int64
	ReasoningTokens    int64
}

// Proto converts u to the shared Usage message.
func (u Usage) Proto() *baagentv1.Usage {
	return &baagentv1.Usage{
		PromptTokens:       u.PromptTokens,
		CompletionTokens:   u.CompletionTokens,
		TotalTokens:        u.TotalTokens,
		CachedPromptTokens: u.CachedPromptTokens,
	}
}

// MessageFromProto converts a shared ChatMessage. Fields the API has no
// place for (id, importance, round, kind, tool_name, is_error) are dropped;
// an error observation is recognisable by its content.
func MessageFromProto(m *baagentv1.ChatMessage) (Message, error) {
	if m == nil {
		return Message{}, fmt.Errorf("%w: nil message", ErrBadRequest)
	}
	role, err := roleFromProto(m.GetRole())
	if err != nil {
		return Message{}, err
	}
	out := Message{
		Role:             role,
		Content:          m.GetContent(),
		Name:             m.GetName(),
		ReasoningContent: m.GetReasoningContent(),
		ToolCallID:       m.GetToolCallId(),
	}
	for _, tc := range m.GetToolCalls() {
		out.ToolCalls = append(out.ToolCalls, ToolCall{ID: tc.GetId(), Name: tc.GetName(), Arguments: tc.GetArguments()})
	}
	return out, nil
}

// MessagesFromProto converts a conversation; the first bad message fails it
// with an error naming its index.
func MessagesFromProto(ms []*baagentv1.ChatMessage) ([]Message, error) {
	out := make([]Message, 0, len(ms))
	for i, m := range ms {
		c, err := MessageFromProto(m)
		if err != nil {
			return nil, fmt.Errorf("messages[%d]: %w", i, err)
		}
		out = append(out, c)
	}
	return out, nil
}

// Proto converts m to the shared ChatMessage (id, round and timestamps are
// left for the caller to fill in).
func (m Message) Proto() *baagentv1.ChatMessage {
	out := &baagentv1.ChatMessage{
		Role:             roleToProto(m.Role),
		Content:          m.Content,
		Name:             m.Name,
		ReasoningContent: m.ReasoningContent,
		ToolCallId:       m.ToolCallID,
	}
	for _, tc := range m.ToolCalls {
		out.ToolCalls = append(out.ToolCalls, &baagentv1.ToolCall{Id: tc.ID, Name: tc.Name, Arguments: tc.Arguments})
	}
	return out
}

// ToolsFromProto converts tool schemas; parameters become their JSON text.
func ToolsFromProto(ts []*baagentv1.ToolSchema) ([]Tool, error) {
	out := make([]Tool, 0, len(ts))
	for i, t := range ts {
		if t == nil {
			return nil, fmt.Errorf("tools[%d]: %w: nil tool", i, ErrBadRequest)
		}
		tool := Tool{Name: t.GetName(), Description: t.GetDescription()}
		if p := t.GetParameters(); p != nil {
			b, err := protojson.Marshal(p)
			if err != nil {
				return nil, fmt.Errorf("tools[%d].parameters: %w: %w", i, ErrBadRequest, err)
			}
			tool.Parameters = b
		}
		out = append(out, tool)
	}
	return out, nil
}

func roleFromProto(r baagentv1.Role) (string, error) {
	switch r {
	case baagentv1.Role_ROLE_SYSTEM:
		return RoleSystem, nil
	case baagentv1.Role_ROLE_USER:
		return RoleUser, nil
	case baagentv1.Role_ROLE_ASSISTANT:
		return RoleAssistant, nil
	case baagentv1.Role_ROLE_TOOL:
		return RoleTool, nil
	}
	return "", fmt.Errorf("%w: role %v is not a chat role", ErrBadRequest, r)
}

func roleToProto(r string) baagentv1.Role {
	switch r {
	case RoleSystem:
		return baagentv1.Role_ROLE_SYSTEM
	case RoleUser:
		return baagentv1.Role_ROLE_USER
	case RoleAssistant:
		return baagentv1.Role_ROLE_ASSISTANT
	case RoleTool:
		return baagentv1.Role_ROLE_TOOL
	}
	return baagentv1.Role_ROLE_UNSPECIFIED
}
