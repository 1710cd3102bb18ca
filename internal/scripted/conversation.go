package scripted

import (
	"fmt"
	"strings"

	openai "github.com/sashabaranov/go-openai"
)

// requestError is a request the chat-completions API would refuse (400).
type requestError struct {
	param, msg string
}

func (e *requestError) Error() string { return e.param + ": " + e.msg }

// conversation is what the server derives from one request: which user
// message is the request being answered, and what happened since.
type conversation struct {
	// anchor is the index of the user request; -1 when there is none.
	anchor      int
	userRequest string
	// round is the request's number among the conversation's requests.
	round int
	// assistantTurns is how many assistant messages follow the anchor: the
	// index of the turn to play next.
	assistantTurns int
	// lastResults answer the latest assistant message's tool calls.
	lastResults []ToolResult
	// allResults are the tool messages since the anchor.
	allResults []ToolResult
}

// text is a message's text, whether sent as a string or as content parts.
func text(m *openai.ChatCompletionMessage) string {
	if len(m.MultiContent) == 0 {
		return m.Content
	}
	var b strings.Builder
	for _, p := range m.MultiContent {
		if p.Type == openai.ChatMessagePartTypeText {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// analyze validates the message sequence as the API does (every tool call
// answered by a tool message before the conversation goes on, no tool
// message without its call) and finds the request being answered.
//
// The request is the latest user message that starts a round: one with no
// assistant or tool message before it, or whose latest assistant/tool
// message before it is a final answer (an assistant message without tool
// calls). A user message that follows a tool result was injected in the
// middle of a round (skill instructions, for example) and is not a request.
func analyze(msgs []openai.ChatCompletionMessage) (*conversation, error) {
	if len(msgs) == 0 {
		return nil, &requestError{"messages", "at least one message is required"}
	}
	c := &conversation{anchor: -1}
	pending := map[string]string{} // unanswered tool call id → tool name
	names := map[string]string{}   // tool call id → tool name, since the anchor
	var lastActor *openai.ChatCompletionMessage
	for i := range msgs {
		m := &msgs[i]
		param := fmt.Sprintf("messages[%d]", i)
		if m.Role != openai.ChatMessageRoleTool && len(pending) > 0 {
			return nil, &requestError{param, "an assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'"}
		}
		switch m.Role {
		case openai.ChatMessageRoleSystem, openai.ChatMessageRoleDeveloper:
		case openai.ChatMessageRoleUser:
			if lastActor == nil || (lastActor.Role == openai.ChatMessageRoleAssistant && len(lastActor.ToolCalls) == 0) {
				c.anchor, c.userRequest = i, text(m)
				c.round++
				c.assistantTurns = 0
				c.lastResults, c.allResults = nil, nil
				clear(names)
			}
		case openai.ChatMessageRoleAssistant:
			if i > c.anchor && c.anchor >= 0 {
				c.assistantTurns++
			}
			c.lastResults = nil
			for j, tc := range m.ToolCalls {
				if tc.ID == "" {
					return nil, &requestError{fmt.Sprintf("%s.tool_calls[%d].id", param, j), "required"}
				}
				pending[tc.ID] = tc.Function.Name
				names[tc.ID] = tc.Function.Name
			}
			lastActor = m
		case openai.ChatMessageRoleTool:
			name, ok := pending[m.ToolCallID]
			if !ok {
				return nil, &requestError{param + ".tool_call_id", fmt.Sprintf("%q does not answer a tool call of the preceding assistant message", m.ToolCallID)}
			}
			delete(pending, m.ToolCallID)
			r := ToolResult{ID: m.ToolCallID, Name: name, Content: text(m)}
			c.lastResults = append(c.lastResults, r)
			c.allResults = append(c.allResults, r)
			lastActor = m
		default:
			return nil, &requestError{param + ".role", fmt.Sprintf("%q is not system, developer, user, assistant or tool", m.Role)}
		}
	}
	if len(pending) > 0 {
		return nil, &requestError{"messages", "an assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'"}
	}
	return c, nil
}
