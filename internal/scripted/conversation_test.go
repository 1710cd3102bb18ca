package scripted

import (
	"errors"
	"testing"

	openai "github.com/sashabaranov/go-openai"
)

func msg(role, content string) openai.ChatCompletionMessage {
	return openai.ChatCompletionMessage{Role: role, Content: content}
}

func callMsg(ids ...string) openai.ChatCompletionMessage {
	m := openai.ChatCompletionMessage{Role: "assistant"}
	for _, id := range ids {
		m.ToolCalls = append(m.ToolCalls, openai.ToolCall{ID: id, Type: "function", Function: openai.FunctionCall{Name: "tool_" + id, Arguments: "{}"}})
	}
	return m
}

func toolMsg(id, content string) openai.ChatCompletionMessage {
	return openai.ChatCompletionMessage{Role: "tool", ToolCallID: id, Content: content}
}

func TestAnalyzeFindsTheRequestAndTheTurn(t *testing.T) {
	msgs := []openai.ChatCompletionMessage{
		msg("system", "sys"),
		msg("user", "first question"),
		callMsg("a"),
		toolMsg("a", "r1"),
		msg("assistant", "first answer"),
		msg("user", "second question"),
		callMsg("b", "c"),
		toolMsg("b", "rb"),
		toolMsg("c", "rc"),
		// Injected in the middle of the round (skill instructions): not a request.
		msg("user", "<skill instructions>"),
		msg("system", "permissions"),
		callMsg("d"),
		toolMsg("d", "rd"),
	}
	c, err := analyze(msgs)
	if err != nil {
		t.Fatal(err)
	}
	if c.anchor != 5 || c.userRequest != "second question" || c.round != 2 || c.assistantTurns != 2 {
		t.Errorf("anchor %d request %q round %d turns %d", c.anchor, c.userRequest, c.round, c.assistantTurns)
	}
	if len(c.lastResults) != 1 || c.lastResults[0].Content != "rd" || c.lastResults[0].Name != "tool_d" {
		t.Errorf("last results %+v", c.lastResults)
	}
	if len(c.allResults) != 3 {
		t.Errorf("all results %+v", c.allResults)
	}
	// Parts instead of a string.
	parts := openai.ChatCompletionMessage{Role: "user", MultiContent: []openai.ChatMessagePart{{Type: openai.ChatMessagePartTypeText, Text: "hello "}, {Type: openai.ChatMessagePartTypeText, Text: "there"}}}
	if c, err := analyze([]openai.ChatCompletionMessage{parts}); err != nil || c.userRequest != "hello there" || c.round != 1 {
		t.Errorf("parts: %+v %v", c, err)
	}
	if c, err := analyze([]openai.ChatCompletionMessage{msg("system", "only")}); err != nil || c.anchor != -1 {
		t.Errorf("no user: %+v %v", c, err)
	}
}

func TestAnalyzeRefusesBrokenToolSequences(t *testing.T) {
	cases := map[string][]openai.ChatCompletionMessage{
		"empty":              nil,
		"unanswered at end":  {msg("user", "q"), callMsg("a")},
		"partly answered":    {msg("user", "q"), callMsg("a", "b"), toolMsg("a", "x"), msg("user", "again")},
		"orphan tool result": {msg("user", "q"), toolMsg("zzz", "x")},
		"answered twice":     {msg("user", "q"), callMsg("a"), toolMsg("a", "x"), toolMsg("a", "y")},
		"bad role":           {msg("robot", "q")},
		"call without id":    {msg("user", "q"), callMsg("")},
	}
	for name, msgs := range cases {
		_, err := analyze(msgs)
		var re *requestError
		if !errors.As(err, &re) || re.param == "" {
			t.Errorf("%s: err = %v", name, err)
		}
	}
}
