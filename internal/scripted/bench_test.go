package scripted_test

import (
	"context"
	"testing"

	"github.com/baagent/baagent/internal/llm"
	"github.com/baagent/baagent/internal/scripted"
)

// BenchmarkChatStep is one model step of a ReAct loop through the real
// client and the scripted server over loopback HTTP: the request with a
// tool result, the streamed answer quoting it, exact usage counting.
func BenchmarkChatStep(b *testing.B) {
	for _, stream := range []bool{true, false} {
		name := "stream"
		if !stream {
			name = "complete"
		}
		b.Run(name, func(b *testing.B) {
			c, _ := start(b, scripted.Options{Counter: counter(b)})
			msgs := []llm.Message{
				{Role: llm.RoleSystem, Content: "You are a business analyst."},
				{Role: llm.RoleUser, Content: "Which product category had the highest revenue last quarter?"},
				{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "call_revenue-by-category_1_1_1", Name: "sql_query", Arguments: `{"query":"SELECT 1"}`}}},
				{Role: llm.RoleTool, ToolCallID: "call_revenue-by-category_1_1_1", Content: "| category | revenue | orders |\n|---|---|---|\n| Software | 2104842.9 | 176 |\n| Hardware | 391682.64 | 70 |\n| Services | 300671 | 63 |\n\n(3 rows)"},
			}
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				var resp *llm.Response
				var err error
				if stream {
					resp, err = c.Chat(ctx, llm.Request{Messages: msgs}, nil)
				} else {
					resp, err = c.Complete(ctx, llm.Request{Messages: msgs})
				}
				if err != nil || resp.FinishReason != llm.FinishStop {
					b.Fatal(err, resp)
				}
			}
		})
	}
}
