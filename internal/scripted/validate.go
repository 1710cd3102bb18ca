package scripted

import (
	openai "github.com/sashabaranov/go-openai"
)

// ValidateMessages checks a Chat Completions message list the way the
// server checks a request's messages (every tool call answered by one tool
// message before the conversation goes on, no tool message without its
// call, known roles, tool calls with ids). A refusal names the offending
// message, as in "messages[3].tool_call_id: …".
func ValidateMessages(msgs []openai.ChatCompletionMessage) error {
	_, err := analyze(msgs)
	return err
}
