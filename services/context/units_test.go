package contextsvc

import (
	"strings"
	"testing"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// TestRepairsInvalidHistory: a tool result without its call and a call
// without its result are left out of the window, which stays valid.
func TestRepairsInvalidHistory(t *testing.T) {
	t.Parallel()

	e := newEnv(t, Options{})
	hist := []*baagentv1.ChatMessage{
		{Id: "u", Role: roleUser, Content: "hi"},
		{Id: "orphan", Role: roleTool, ToolCallId: "call_x", Content: "result for nobody"},
		{Id: "a1", Role: roleAssistant, Content: "checking", ToolCalls: []*baagentv1.ToolCall{{Id: "c1", Name: "glob"}, {Id: "c2", Name: "grep"}}},
		{Id: "u2", Role: roleUser, Content: "interjection"},
		{Id: "t1", Role: roleTool, ToolCallId: "c1", Content: "late result"},
		{Id: "a2", Role: roleAssistant, ToolCalls: []*baagentv1.ToolCall{{Id: "c3", Name: "glob"}}},
	}
	appendAll(t, e.client, "t", "c", hist)
	req := buildReqFor("gpt-4o", strategyAuto)
	resp, err := e.client.BuildWindow(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	windowCheck{model: "gpt-4o", history: readAll(t, e.client, "t", "c", 0)}.check(t, e, req, resp)
	var got []string
	for _, m := range resp.GetMessages()[len(testSystem):] {
		got = append(got, m.GetMessage().GetId())
	}
	if strings.Join(got, ",") != "u,a1,t1,u2" {
		t.Fatalf("window ids %v, want u,a1,t1,u2 (late result moved after its call, unanswered calls removed)", got)
	}
}
