package scripted

import (
	"fmt"
)

// reply is one assistant message the server sends.
type reply struct {
	// label names what produced it: a scenario, "fallback" or "end_of_script".
	label     string
	turn      int
	reasoning string
	text      string
	calls     []replyCall
}

type replyCall struct {
	id, name, arguments string
}

func (r *reply) finishReason() string {
	if len(r.calls) > 0 {
		return "tool_calls"
	}
	return "stop"
}

// playTurn renders the next turn of sc for conversation c.
func playTurn(sc *Scenario, c *conversation) *reply {
	for i := range c.allResults {
		c.allResults[i].IsError = sc.toolError.MatchString(c.allResults[i].Content)
	}
	anyError := false
	for i := range c.lastResults {
		c.lastResults[i].IsError = sc.toolError.MatchString(c.lastResults[i].Content)
		anyError = anyError || c.lastResults[i].IsError
	}
	n := c.assistantTurns
	if n >= len(sc.turns) {
		return &reply{label: "end_of_script", turn: n + 1, text: fmt.Sprintf(
			"[scripted model] Scenario %q scripts %d turns and this would be turn %d, so I have nothing more to say. Ask a new question to start another scenario.",
			sc.Name, len(sc.turns), n+1)}
	}
	t := sc.turns[n]
	if anyError && t.ifToolError != nil {
		t = t.ifToolError
	}
	data := &TurnData{
		UserRequest: c.userRequest, Scenario: sc.Name, Round: c.round, Turn: n + 1,
		ToolResults: c.lastResults, AllToolResults: c.allResults,
	}
	if k := len(c.allResults); k > 0 {
		data.LastToolResult = c.allResults[k-1].Content
	}
	r := &reply{label: sc.Name, turn: n + 1, reasoning: render(t.reasoning, data), text: render(t.text, data)}
	for j, call := range t.toolCalls {
		r.calls = append(r.calls, replyCall{
			// Deterministic per conversation: the same conversation always
			// gets the same ids, and rounds and turns never collide.
			id:        fmt.Sprintf("call_%s_%d_%d_%d", sc.Name, c.round, n+1, j+1),
			name:      call.name,
			arguments: call.arguments,
		})
	}
	return r
}
