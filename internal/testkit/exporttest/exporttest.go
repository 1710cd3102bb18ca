// Package exporttest checks export documents: the tests of the converter,
// of the gateway's export RPCs and of the round trip through a real run
// share it.
package exporttest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	openai "github.com/sashabaranov/go-openai"

	"github.com/baagent/baagent/internal/scripted"
)

// ClaudeMessage is one message of a claude export.
type ClaudeMessage struct {
	Role    string        `json:"role"`
	Content []ClaudeBlock `json:"content"`
}

// ClaudeBlock is one content block.
type ClaudeBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	Thinking  string          `json:"thinking,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	// Content is the tool_result's text.
	Content string `json:"content,omitempty"`
	IsError *bool  `json:"is_error,omitempty"`
}

// Claude decodes a claude export strictly and checks its pairing: roles
// are user or assistant, no message is empty, tool_use ids are unique in
// the document, every tool_use is answered by exactly one tool_result in
// the next message (a user message), and no tool_result answers anything
// else.
func Claude(data []byte) ([]ClaudeMessage, error) {
	var msgs []ClaudeMessage
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&msgs); err != nil {
		return nil, fmt.Errorf("claude export is not a message array: %w", err)
	}
	if dec.More() {
		return nil, errors.New("claude export: data after the array")
	}
	seen := map[string]bool{}
	var open map[string]bool // tool_use ids the next message must answer
	for i, m := range msgs {
		if m.Role != "user" && m.Role != "assistant" {
			return nil, fmt.Errorf("message %d: role %q", i, m.Role)
		}
		if len(m.Content) == 0 {
			return nil, fmt.Errorf("message %d: no content", i)
		}
		if i > 0 && msgs[i-1].Role == m.Role {
			return nil, fmt.Errorf("message %d: two %s messages in a row", i, m.Role)
		}
		answered := map[string]bool{}
		var uses map[string]bool
		for j, b := range m.Content {
			switch b.Type {
			case "text":
			case "thinking":
				if m.Role != "assistant" {
					return nil, fmt.Errorf("message %d block %d: thinking in a %s message", i, j, m.Role)
				}
			case "tool_use":
				if m.Role != "assistant" {
					return nil, fmt.Errorf("message %d block %d: tool_use in a %s message", i, j, m.Role)
				}
				if b.ID == "" || seen[b.ID] {
					return nil, fmt.Errorf("message %d block %d: tool_use id %q empty or not unique", i, j, b.ID)
				}
				var obj map[string]any
				if err := json.Unmarshal(b.Input, &obj); err != nil || obj == nil {
					return nil, fmt.Errorf("message %d block %d: tool_use input is not an object: %s", i, j, b.Input)
				}
				seen[b.ID] = true
				if uses == nil {
					uses = map[string]bool{}
				}
				uses[b.ID] = true
			case "tool_result":
				if m.Role != "user" {
					return nil, fmt.Errorf("message %d block %d: tool_result in a %s message", i, j, m.Role)
				}
				if !open[b.ToolUseID] || answered[b.ToolUseID] {
					return nil, fmt.Errorf("message %d block %d: tool_result for %q answers no open tool_use of the previous message", i, j, b.ToolUseID)
				}
				if b.IsError == nil {
					return nil, fmt.Errorf("message %d block %d: tool_result without is_error", i, j)
				}
				answered[b.ToolUseID] = true
			default:
				return nil, fmt.Errorf("message %d block %d: type %q", i, j, b.Type)
			}
		}
		if len(answered) != len(open) {
			return nil, fmt.Errorf("message %d answers %d of the %d tool_use blocks of the previous message", i, len(answered), len(open))
		}
		open = uses
	}
	if len(open) > 0 {
		return nil, fmt.Errorf("the last message has %d unanswered tool_use blocks", len(open))
	}
	return msgs, nil
}

// OpenAI decodes an openai export and checks it with the scripted model's
// validator of request messages.
func OpenAI(data []byte) ([]openai.ChatCompletionMessage, error) {
	var msgs []openai.ChatCompletionMessage
	if err := json.Unmarshal(data, &msgs); err != nil {
		return nil, fmt.Errorf("openai export is not a message array: %w", err)
	}
	if len(msgs) == 0 {
		return msgs, nil
	}
	if err := scripted.ValidateMessages(msgs); err != nil {
		return nil, fmt.Errorf("openai export refused by the validator: %w", err)
	}
	for i, m := range msgs {
		for j, c := range m.ToolCalls {
			if c.Type != openai.ToolTypeFunction {
				return nil, fmt.Errorf("messages[%d].tool_calls[%d].type = %q", i, j, c.Type)
			}
			if c.Function.Arguments == "" {
				return nil, fmt.Errorf("messages[%d].tool_calls[%d].function.arguments is empty", i, j)
			}
		}
	}
	return msgs, nil
}

// Events splits a JSON Lines export into its lines, checking each is one
// JSON object.
func Events(data []byte) ([]map[string]any, error) {
	var out []map[string]any
	if len(data) == 0 {
		return out, nil
	}
	if data[len(data)-1] != '\n' {
		return nil, errors.New("events export does not end with a newline")
	}
	for i, line := range bytes.Split(data[:len(data)-1], []byte("\n")) {
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil || m == nil {
			return nil, fmt.Errorf("line %d is not a JSON object: %v", i+1, err)
		}
		out = append(out, m)
	}
	return out, nil
}
